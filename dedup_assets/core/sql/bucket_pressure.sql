-- Band-level pair slots: a bucket of n documents yields n*(n-1)/2 self-join rows.
-- Computed before the join so an oversized corpus is refused without doing the work.
with buckets as (
  select band_index, lsh_band, count(*)::bigint as bucket_size
  from {band_memberships}
  group by band_index, lsh_band
),
worst as (
  select band_index, lsh_band, bucket_size
  from buckets
  order by bucket_size desc, band_index, lsh_band
  limit 1
)
select
  (select coalesce(sum(bucket_size * (bucket_size - 1) // 2), 0)::bigint from buckets),
  coalesce((select bucket_size from worst), 0),
  (select printf('%03d:%016x', band_index, lsh_band) from worst),
  (select count(*) from buckets)

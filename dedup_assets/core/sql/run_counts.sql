-- The figures of a run, as one row. No parameters.
with replaced as (
  -- replaced_characters, which the CSV, JSONL and WARC readers add (a Parquet input has none)
  select replaced_characters
  from (select null::bigint as replaced_characters where false union all by name select * from {documents})
)
select
  (select count(*) from {documents}) as document_rows,
  (select count(*) filter (where replaced_characters > 0) from replaced) as replaced_character_rows,
  (select coalesce(sum(replaced_characters), 0) from replaced) as replaced_characters,
  (select count(*) from {rejected_documents}) as rejected_document_rows,
  (select count(*) from {candidate_pairs}) as candidate_pair_rows,
  (select count(*) filter (where left_domain = right_domain) from {candidate_pairs})
    as same_domain_candidate_pair_rows,
  (select count(*) from {duplicate_pairs}) as duplicate_pair_rows,
  (select count(*) filter (where is_exact) from {duplicate_pairs}) as exact_duplicate_pair_rows,
  (select count(*) filter (where left_domain = right_domain) from {duplicate_pairs})
    as same_domain_duplicate_pair_rows,
  -- the input's own clusters: a reference document's matches are counted apart
  (select count(distinct cluster_id) filter (where decision <> 'matched_reference') from {clusters}) as cluster_count,
  (select count(distinct cluster_id) filter (where cluster_size > 1 and decision <> 'matched_reference') from {clusters})
    as duplicate_cluster_rows,
  (select count(*) filter (where cluster_size = 1 and decision <> 'matched_reference') from {clusters})
    as singleton_cluster_rows,
  (select coalesce(max(cluster_size) filter (where decision <> 'matched_reference'), 0) from {clusters})
    as max_cluster_size,
  (select count(*) filter (where chained) from {clusters}) as chained_member_rows,
  (select count(*) filter (where representative_rank = 1) from {clusters}) as representative_rows,
  (select count(*) filter (where decision = 'matched_reference') from {clusters}) as reference_matched_rows,
  (select count(*) filter (where decision <> 'matched_reference' and cluster_size > 1) from {clusters})
    as within_input_duplicate_rows

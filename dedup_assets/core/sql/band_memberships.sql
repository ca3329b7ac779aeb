-- One row per (document, band). Documents without shingles have no band keys: they never share
-- a bucket and stay singletons.
select
  doc_id,
  (generate_subscripts(lsh_bands, 1) - 1)::smallint as band_index,
  unnest(lsh_bands) as lsh_band
from {fingerprinted}
where shingle_count > 0

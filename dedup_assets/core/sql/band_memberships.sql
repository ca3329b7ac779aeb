-- One row per (document, band). A document without tokens has band keys made from its characters
-- (core/sketch/fingerprints.py's tokenless_keys): it shares buckets only with its exact copies.
select
  doc_id,
  (generate_subscripts(lsh_bands, 1) - 1)::smallint as band_index,
  unnest(lsh_bands) as lsh_band
from {fingerprinted}

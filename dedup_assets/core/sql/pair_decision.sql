-- The acceptance rule, written once: the DuckDB engine runs it over its candidates as
-- sql/scored_pairs.sql measures them, the ray engine over each batch of its own. A 'content_hash'
-- pair is two copies of one text: Jaccard and overlap 1, and exact. Exact Jaccard at or above the
-- threshold makes a duplicate; the signature overlap (the share of equal sketch coordinates) only
-- names the reason. It reads "measured": the candidate pairs' columns through found_by, then jaccard,
-- signature_overlap and is_exact where they were measured (null where not).
-- $1 = jaccard_threshold, $2 = signature_overlap_threshold.
with scored as (
  select * replace (
    if(found_by = 'content_hash', 1.0::double, jaccard) as jaccard,
    if(found_by = 'content_hash', 1.0::double, signature_overlap) as signature_overlap,
    found_by = 'content_hash' or is_exact as is_exact
  )
  from {measured}
)
select
  *,
  jaccard >= $1 as is_duplicate,
  case
    when jaccard >= $1 and signature_overlap >= $2 then 'jaccard_and_minhash'
    when jaccard >= $1 then 'jaccard_match'
    when signature_overlap >= $2 then 'minhash_only_rejected'
    else 'below_jaccard_threshold'
  end as reason
from scored

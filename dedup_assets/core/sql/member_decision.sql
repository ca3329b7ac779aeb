-- The cluster rule's decisions, written once: sql/clusters.sql runs it over its members, the
-- ray engine over each batch of its own. Rank 1 of a cluster (the keep rule's first,
-- core/keep/rule.py) is kept and every other member is removed in its favour; a member is chained
-- when its Jaccard with the representative is below the threshold: only connected components
-- (cluster_mode components) put it there. It reads "members": doc_id through
-- representative_doc_id, then jaccard_to_representative, then any columns of the caller's, which
-- come last.
-- $1 = jaccard_threshold.
select
  doc_id,
  source_file,
  input_row,
  cluster_id,
  cluster_size,
  crawled_at,
  token_count,
  representative_rank,
  representative_doc_id,
  case when representative_rank = 1 then 'kept_representative' else 'removed_duplicate' end
    as decision,
  jaccard_to_representative,
  coalesce(jaccard_to_representative < $1, false) as chained,
  * exclude (
    doc_id, source_file, input_row, cluster_id, cluster_size, crawled_at, token_count,
    representative_rank, representative_doc_id, jaccard_to_representative
  )
from {members}

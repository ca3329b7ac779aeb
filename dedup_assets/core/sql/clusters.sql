-- Every document in exactly one cluster: members of a duplicate component take the cluster
-- star_members gives them (doc_id, representative_doc_id, representative_rank,
-- jaccard_to_representative, keep_reason), named by its smallest doc_id; everything else is its own cluster,
-- and its representative. star_members ranked each cluster's members by the keep rule
-- (core/keep/rule.py); sql/member_decision.sql then decides on every member. A document that
-- matches a reference is in the cluster that star_members' reference_cluster_id names, of that
-- reference document, which no input row holds: build_clusters decides it matched_reference.
-- Rows are stored in input order (fingerprinted's rowid, which follows documents: input files in
-- order, rows in file order; documents may be a view, which has no rowid), so the two line up
-- position by position.
with stars as (
  select
    doc_id,
    min(doc_id) over (partition by reference_cluster_id, representative_doc_id) as root_doc_id,
    representative_doc_id,
    representative_rank,
    jaccard_to_representative,
    keep_reason,
    reference_cluster_id
  from star_members
),
membership as (
  select
    d.doc_id,
    f.rowid as document_position,
    d.source_file,
    d.input_row,
    -- matched to a reference (reference_matches): the cluster of that reference document's matches
    coalesce(s.reference_cluster_id, 'cluster-' || coalesce(s.root_doc_id, d.doc_id)) as cluster_id,
    d.crawled_at,
    f.token_count,
    coalesce(s.representative_rank, 1) as representative_rank,
    coalesce(s.representative_doc_id, d.doc_id) as representative_doc_id,
    s.jaccard_to_representative,
    s.keep_reason,
    s.reference_cluster_id
  from {documents} d
  join {fingerprinted} f on f.doc_id = d.doc_id
  left join stars s on s.doc_id = d.doc_id
)
select
  doc_id,
  source_file,
  input_row,
  cluster_id,
  count(*) over (partition by cluster_id) as cluster_size,
  crawled_at,
  token_count,
  representative_rank,
  representative_doc_id,
  jaccard_to_representative,
  keep_reason,
  document_position,
  reference_cluster_id
from membership

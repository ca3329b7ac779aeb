-- The pairs on which the clusters and the labels disagree, pair labels first, then in doc_id
-- order: labelled pairs (pair_labels) and pairs of labelled documents (cluster_labels) in one
-- cluster against their labels (false_positive) or apart against them (false_negative). Pairs
-- of cluster labels are taken among the first $2 documents (by doc_id) of each label and each
-- cluster, so that a label or cluster of a million documents is never paired out in full.
-- $1 = how many are listed; $2 = documents of one label or cluster paired.
with pair_errors as (
  select
    p.left_doc_id, p.right_doc_id, 'pair' as labels,
    if(p.label = 1, 'false_negative', 'false_positive') as error,
    l.cluster_id as left_cluster_id, r.cluster_id as right_cluster_id
  from pair_labels p
  join {clusters} l on l.doc_id = p.left_doc_id
  join {clusters} r on r.doc_id = p.right_doc_id
  where (p.label = 1) <> (l.cluster_id = r.cluster_id)
),
labelled as (
  select
    c.doc_id, l.cluster_label, c.cluster_id,
    row_number() over (partition by l.cluster_label order by c.doc_id) as label_rank,
    row_number() over (partition by c.cluster_id order by c.doc_id) as cluster_rank
  from cluster_labels l
  join {clusters} c on c.doc_id = l.doc_id
),
cluster_errors as (
  select a.doc_id, b.doc_id, 'cluster', 'false_negative', a.cluster_id, b.cluster_id
  from labelled a
  join labelled b on b.cluster_label = a.cluster_label and a.doc_id < b.doc_id
  where a.cluster_id <> b.cluster_id and a.label_rank <= $2 and b.label_rank <= $2
  union all
  select a.doc_id, b.doc_id, 'cluster', 'false_positive', a.cluster_id, b.cluster_id
  from labelled a
  join labelled b on b.cluster_id = a.cluster_id and a.doc_id < b.doc_id
  where a.cluster_label <> b.cluster_label and a.cluster_rank <= $2 and b.cluster_rank <= $2
)
select * from (select * from pair_errors union all select * from cluster_errors)
order by labels = 'cluster', left_doc_id, right_doc_id
limit $1

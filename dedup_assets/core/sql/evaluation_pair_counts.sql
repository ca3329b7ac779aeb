-- Pair labels (pair_labels: left_doc_id < right_doc_id, label 1 or 0) against the clusters: a
-- pair is predicted a duplicate when its two documents are in one cluster. A pair naming a doc_id
-- the clusters do not hold is not counted. No parameters.
with compared as (
  select p.label = 1 as labelled_duplicate, l.cluster_id = r.cluster_id as predicted_duplicate
  from pair_labels p
  join {clusters} l on l.doc_id = p.left_doc_id
  join {clusters} r on r.doc_id = p.right_doc_id
)
select
  count(*) filter (where labelled_duplicate and predicted_duplicate) as true_positives,
  count(*) filter (where not labelled_duplicate and predicted_duplicate) as false_positives,
  count(*) filter (where labelled_duplicate and not predicted_duplicate) as false_negatives,
  count(*) filter (where not labelled_duplicate and not predicted_duplicate) as true_negatives
from compared

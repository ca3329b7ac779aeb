-- Cluster labels (cluster_labels: doc_id, cluster_label) against the clusters, as the pair
-- counts of the adjusted Rand index over the labelled documents the clusters hold: pairs with
-- one label and one cluster, pairs with one label, pairs in one cluster. No parameters.
with labelled as (
  select c.doc_id, l.cluster_label, c.cluster_id
  from cluster_labels l
  join {clusters} c on c.doc_id = l.doc_id
),
cells as (select count(*)::bigint as n from labelled group by cluster_label, cluster_id),
by_label as (select count(*)::bigint as n from labelled group by cluster_label),
by_cluster as (select count(*)::bigint as n from labelled group by cluster_id)
select
  (select count(*) from labelled) as labelled_documents,
  (select coalesce(sum(n * (n - 1) // 2), 0)::bigint from cells) as together_pairs,
  (select coalesce(sum(n * (n - 1) // 2), 0)::bigint from by_label) as same_label_pairs,
  (select coalesce(sum(n * (n - 1) // 2), 0)::bigint from by_cluster) as same_cluster_pairs

-- Review view of multi-member clusters: who was kept, who was removed, the weakest edge, and
-- how far the members are from the representative (chained members are below the threshold).
-- No parameters.
with members as (
  select c.cluster_id, c.cluster_size, c.doc_id, c.representative_doc_id, c.representative_rank,
         c.jaccard_to_representative, c.chained, d.domain
  from {clusters} c
  join {documents} d on d.doc_id = c.doc_id
  where c.cluster_size > 1
),
-- the edges inside a cluster: in star mode an edge can join two clusters, and a cluster can
-- hold two members whose edge LSH never found
edges as (
  select l.cluster_id, count(*) as edge_count, min(p.jaccard) as weakest_jaccard,
         min(p.signature_overlap) as weakest_signature_overlap
  from {duplicate_pairs} p
  join {clusters} l on l.doc_id = p.left_doc_id
  join {clusters} r on r.doc_id = p.right_doc_id and r.cluster_id = l.cluster_id
  group by l.cluster_id
)
select
  m.cluster_id,
  any_value(m.cluster_size) as cluster_size,
  any_value(m.representative_doc_id) as representative_doc_id,
  string_agg(m.doc_id, ';' order by m.doc_id) as members,
  string_agg(m.doc_id, ';' order by m.doc_id) filter (where m.representative_rank > 1)
    as removed_doc_ids,
  string_agg(distinct m.domain, ';' order by m.domain) as domains,
  coalesce(any_value(e.edge_count), 0) as edge_count,
  any_value(e.weakest_jaccard) as weakest_jaccard,
  any_value(e.weakest_signature_overlap) as weakest_signature_overlap,
  min(m.jaccard_to_representative) as min_jaccard_to_representative,
  count(*) filter (where m.chained) as chained_members
from members m
left join edges e on e.cluster_id = m.cluster_id
group by m.cluster_id
order by m.cluster_id

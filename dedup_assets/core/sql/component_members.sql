-- Every member of a duplicate component (component_roots: doc_id, root_doc_id, text_doc_id), in
-- the keep rule's order within its component (the order of sql/clusters.sql), with the index of
-- its component and of its text in sql/component_texts.sql. No parameters.
select
  r.doc_id,
  dense_rank() over (order by r.root_doc_id) - 1 as component_index,
  dense_rank() over (order by r.text_doc_id) - 1 as text_index
from component_roots r
join {documents} d on d.doc_id = r.doc_id
join {fingerprinted} f on f.doc_id = r.doc_id
order by r.root_doc_id, d.crawled_at desc nulls last, f.token_count desc, r.doc_id

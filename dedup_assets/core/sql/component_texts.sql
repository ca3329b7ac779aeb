-- The distinct texts of the duplicate components (component_roots.text_doc_id), in doc_id order
-- (the text_index of sql/component_members.sql), with the body and its shingle count as
-- fingerprinted. component_documents (doc_id, body) holds their bodies (store.rows_with_ids).
-- No parameters.
select d.body, f.shingle_count
from (select distinct text_doc_id from component_roots) t
join component_documents d on d.doc_id = t.text_doc_id
join {fingerprinted} f on f.doc_id = t.text_doc_id
order by t.text_doc_id

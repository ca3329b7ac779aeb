-- The two bodies of each disagreeing pair (disagreements: left_doc_id, right_doc_id, position),
-- in the pairs' order; error_documents (doc_id, body) holds those documents' bodies
-- (store.rows_with_ids). No parameters.
select l.body as left_body, r.body as right_body
from disagreements e
join error_documents l on l.doc_id = e.left_doc_id
join error_documents r on r.doc_id = e.right_doc_id
order by e.position

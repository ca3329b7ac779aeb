-- Every member of a duplicate component (component_roots: doc_id, root_doc_id, text_doc_id), with
-- the index of its component and of its text in sql/component_texts.sql, and the columns the keep
-- rule reads (core/keep/rule.py, which orders them; keep/columns.py: the columns its rules add, each
-- ", d.<column> as <field>"). No parameters.
select
  r.doc_id,
  dense_rank() over (order by r.root_doc_id) - 1 as component_index,
  dense_rank() over (order by r.text_doc_id) - 1 as text_index,
  d.domain,
  d.crawled_at,
  f.token_count
  {keep_columns}
from component_roots r
join {documents} d on d.doc_id = r.doc_id
join {fingerprinted} f on f.doc_id = r.doc_id

-- Every document in exactly one cluster: members of a duplicate component take its root (the
-- smallest doc_id); everything else is its own cluster. Within a cluster the representative is
-- the newest crawled_at, then the most tokens, then the smallest doc_id.
-- Rows are stored in the documents table's own row order (its rowid: input files in order, rows
-- in file order), so the two line up position by position.
with membership as (
  select
    d.doc_id,
    d.rowid as document_position,
    d.source_file,
    d.input_row,
    'cluster-' || coalesce(m.root_doc_id, d.doc_id) as cluster_id,
    d.crawled_at,
    f.token_count
  from {documents} d
  join {fingerprinted} f on f.doc_id = d.doc_id
  left join component_roots m on m.doc_id = d.doc_id
),
ranked as (
  select
    *,
    count(*) over (partition by cluster_id) as cluster_size,
    row_number() over (
      partition by cluster_id order by crawled_at desc, token_count desc, doc_id
    ) as representative_rank
  from membership
)
select
  doc_id,
  source_file,
  input_row,
  cluster_id,
  cluster_size,
  crawled_at,
  token_count,
  representative_rank,
  first_value(doc_id) over (
    partition by cluster_id order by representative_rank
  ) as representative_doc_id,
  case when representative_rank = 1 then 'kept_representative' else 'removed_duplicate' end
    as decision
from ranked
order by document_position

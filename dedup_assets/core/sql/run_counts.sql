-- The figures of a run, as one row.
select
  (select count(*) from {documents}) as document_rows,
  (select count(*) from {rejected_documents}) as rejected_document_rows,
  (select count(*) from {candidate_pairs}) as candidate_pair_rows,
  (select count(*) from {duplicate_pairs}) as duplicate_pair_rows,
  (select count(*) filter (where is_exact) from {duplicate_pairs}) as exact_duplicate_pair_rows,
  (select count(distinct cluster_id) from {clusters}) as cluster_count,
  (select count(distinct cluster_id) filter (where cluster_size > 1) from {clusters})
    as duplicate_cluster_rows,
  (select count(*) filter (where cluster_size = 1) from {clusters}) as singleton_cluster_rows,
  (select count(*) filter (where representative_rank = 1) from {clusters}) as representative_rows

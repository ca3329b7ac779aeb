-- The representatives with every input column (stored as a view; release files sort by doc_id).
select d.*, c.cluster_id, c.cluster_size
from {documents} d
join {clusters} c on c.doc_id = d.doc_id
where c.representative_rank = 1

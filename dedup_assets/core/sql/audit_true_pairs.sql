-- The recall audit's true pairs (audit_probe.AUDIT_PAIRS_SCHEMA): the probe's rows with a text's
-- rows merged ({merged}: sql/audit_found_merged.sql), each owner named by its first sampled
-- document (owners: each owner's number and sampled_doc_id), in order. No parameters.
select o.sampled_doc_id, m.doc_id, m.jaccard, m.sample_place::integer as sample_place
from {merged} m
join owners o on o.owner = m.owner
order by o.sampled_doc_id, m.doc_id

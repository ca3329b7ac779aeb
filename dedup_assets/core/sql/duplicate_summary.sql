-- Accepted edges by how they were found (found_by), why they were accepted (reason) and whether
-- their two documents share a domain: one row per combination that occurs. No parameters.
select
  found_by,
  reason,
  if(left_domain = right_domain, 'same_domain', 'cross_domain') as domain_relation,
  count(*) as pair_rows,
  count(*) filter (where is_exact) as exact_pair_rows
from {duplicate_pairs}
group by found_by, reason, domain_relation
order by found_by, reason, domain_relation

-- Pairs of different domains by the duplicate edges between their documents, the most first
-- (which sites mirror which), domain_a < domain_b. $1 = pairs of domains returned at most.
select
  least(left_domain, right_domain) as domain_a,
  greatest(left_domain, right_domain) as domain_b,
  count(*) as pairs
from {duplicate_pairs}
where left_domain <> right_domain
group by domain_a, domain_b
order by pairs desc, domain_a, domain_b
limit $1

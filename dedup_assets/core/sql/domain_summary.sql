-- One row per domain, by domain: its documents, those removed as duplicates, its candidate and
-- duplicate pairs within the domain and with other domains (scored_pairs holds every candidate
-- pair, is_duplicate the accepted ones), and the domains it shares the most duplicate pairs with,
-- as 'domain:pairs', the most first, then by name. An empty domain counts as one domain.
-- $partner_domains_shown = partner domains listed per domain.
with documents_by_domain as (
  -- joined on doc_id, not by position: on the ray engine both are views over Parquet folders
  select
    d.domain,
    count(*) as documents,
    count(*) filter (where c.decision = 'removed_duplicate') as removed_documents
  from {documents} d
  join {clusters} c on c.doc_id = d.doc_id
  group by d.domain
),
sides as (
  -- every pair once from each of its two domains, once when it has one
  select left_domain as domain, right_domain as partner, is_duplicate from {scored_pairs}
  union all
  select right_domain, left_domain, is_duplicate from {scored_pairs} where left_domain <> right_domain
),
pairs_by_domain as (
  select
    domain,
    count(*) filter (where partner = domain) as same_domain_candidate_pairs,
    count(*) filter (where partner <> domain) as cross_domain_candidate_pairs,
    count(*) filter (where is_duplicate and partner = domain) as same_domain_duplicate_pairs,
    count(*) filter (where is_duplicate and partner <> domain) as cross_domain_duplicate_pairs,
    count(distinct partner) filter (where is_duplicate and partner <> domain) as duplicate_partner_domains
  from sides
  group by domain
),
partners as (
  select
    domain,
    partner,
    count(*) as pairs,
    row_number() over (partition by domain order by count(*) desc, partner) as rank
  from sides
  where is_duplicate and partner <> domain
  group by domain, partner
),
top_partners as (
  select domain, string_agg(partner || ':' || pairs, ';' order by rank) as top_partner_domains
  from partners
  where rank <= $partner_domains_shown
  group by domain
)
select
  d.domain,
  d.documents,
  d.removed_documents,
  coalesce(p.same_domain_candidate_pairs, 0) as same_domain_candidate_pairs,
  coalesce(p.cross_domain_candidate_pairs, 0) as cross_domain_candidate_pairs,
  coalesce(p.same_domain_duplicate_pairs, 0) as same_domain_duplicate_pairs,
  coalesce(p.cross_domain_duplicate_pairs, 0) as cross_domain_duplicate_pairs,
  coalesce(p.duplicate_partner_domains, 0) as duplicate_partner_domains,
  t.top_partner_domains
from documents_by_domain d
left join pairs_by_domain p on p.domain = d.domain
left join top_partners t on t.domain = d.domain
order by d.domain

-- The recall audit's true pairs counted by text (sql/recall_audit.sql joins and orders them): one
-- row per sampled text (sampled_text, the first copy of a sampled document: the interval's unit)
-- and text it pairs with (partner; equal for the pairs among one text's copies), with their
-- jaccard, jaccard_band and pairs, how many document pairs the row counts. A pair of two sampled
-- documents is counted once, for the earlier in the sample.
-- true_pairs: the probe's rows (audit_probe.AUDIT_PAIRS_SCHEMA: each owner, a sampled shingle
-- set, and the documents it found, one per text where it is not sampled);
-- first_copies: each copy and its first copy. A text of n documents, k of them sampled, counts
-- k·(n − 1) − k·(k − 1)/2 pairs among its copies, and k·m with another text of m documents, less
-- the pairs whose other document is sampled earlier. Shared boilerplate can make the sample's
-- true pairs tens of millions of rows: this is written to a temporary table before they are
-- joined and ordered, as DuckDB could not spill this grouping and that sort in one query.
-- $1 = jaccard_threshold (pairs below it are not true), $2 = the Jaccard bands' labels, $3 = the
-- bands' lower edges above the threshold (audit.band_labels: a pair's band is the label after the
-- edges at or below its Jaccard).
with found as (
  select p.sampled_doc_id as owner, p.jaccard, p.sample_place,
    $2[1 + len(list_filter($3, lambda edge: p.jaccard >= edge))] as jaccard_band,
    coalesce(c.first_copy_doc_id, p.doc_id) as text
  from {true_pairs} p
  left join first_copies c on c.doc_id = p.doc_id
  where p.jaccard >= $1
),
sizes as (
  select first_copy_doc_id as text, count(*) + 1 as documents from first_copies group by all
),
-- the sampled documents of each owner's set (Jaccard 1 with it), by text
own as (
  select owner, text, count(*) as sampled from found where sample_place is not null and jaccard = 1 group by all
),
partners as (
  select owner, text, min(jaccard) as jaccard, min(jaccard_band) as jaccard_band from found group by all
),
-- pairs of a sampled document and a sampled document of another text that is earlier in the
-- sample: that one's
earlier as (
  select x.owner, x.text as sampled_text, y.text, count(*) as pairs
  from found x
  join found y on y.owner = x.owner and y.text <> x.text and y.sample_place < x.sample_place
  where x.sample_place is not null and x.jaccard = 1
  group by all
),
counted as (
  select
    o.text as sampled_text,
    p.text as partner,
    p.jaccard,
    p.jaccard_band,
    if(
      p.text = o.text,
      o.sampled * (coalesce(s.documents, 1) - 1) - o.sampled * (o.sampled - 1) // 2,
      o.sampled * coalesce(s.documents, 1) - coalesce(e.pairs, 0)
    )::bigint as pairs
  from own o
  join partners p on p.owner = o.owner
  left join sizes s on s.text = p.text
  left join earlier e on e.owner = o.owner and e.sampled_text = o.text and e.text = p.text
)
select * from counted

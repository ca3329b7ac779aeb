"""What the cluster checks assert: every document in one cluster with one representative, the
representatives accounting for the input, a batch's removals naming kept documents, and the
warnings about large and chained clusters."""

import hashlib

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from dagster import AssetCheckResult, MetadataValue

from ..core.incremental.index_tables import KEPT, REMOVED
from ..core.read.ingest import document_bodies
from ..core.verify.jaccard import pair_jaccard, reference_pair_jaccard
from ..core.storage.tables import Tables, sql
from ..core.text.normalize import Shingling
from .results import SHOWN, check_result, counted, fetch_rows, warning_result


def every_document_in_one_cluster(
    connection: duckdb.DuckDBPyConnection, documents: str, clusters: str
) -> AssetCheckResult:
    twice = fetch_rows(connection, f"select doc_id, count(*) from {clusters} group by doc_id having count(*) > 1")
    missing = fetch_rows(connection, f"select doc_id from {documents} anti join {clusters} using (doc_id)")
    unknown = fetch_rows(connection, f"select doc_id from {clusters} anti join {documents} using (doc_id)")
    counts = fetch_rows(connection, f"select count(*), count(distinct cluster_id) from {clusters}")[0]
    return check_result(
        [f"{doc_id} is in {counted(n, 'cluster')}" for doc_id, n in twice]
        + [f"{doc_id} is in no cluster" for (doc_id,) in missing]
        + [f"{doc_id} is clustered but not an input document" for (doc_id,) in unknown],
        f"{counted(counts[0], 'document')} in {counted(counts[1], 'cluster')}",
    )


def one_representative_per_cluster(connection: duckdb.DuckDBPyConnection, clusters: str) -> AssetCheckResult:
    wrong = fetch_rows(
        connection,
        f"""
        select cluster_id, count(*) filter (where decision = 'kept_representative') as kept
        from {clusters} where decision <> 'matched_reference'
        group by cluster_id having kept <> 1 order by cluster_id
        """,
    )
    total, matched = fetch_rows(
        connection,
        f"select count(distinct cluster_id) filter (where decision <> 'matched_reference'), "
        f"count(distinct cluster_id) filter (where decision = 'matched_reference') from {clusters}",
    )[0]
    # a reference's document, never removed, stands for its cluster of matched documents
    references = f" (and {counted(matched, 'cluster')} of a reference document)" if matched else ""
    return check_result(
        [f"{cluster_id} has {counted(kept, 'representative')}" for cluster_id, kept in wrong],
        f"{counted(total, 'cluster')}, one representative each{references}",
    )


def representatives_account_for_input(
    connection: duckdb.DuckDBPyConnection, documents: str, clusters: str, deduped: str
) -> AssetCheckResult:
    inputs, kept, removed = fetch_rows(
        connection,
        f"""
        select (select count(*) from {documents}),
               (select count(*) from {deduped}),
               (select count(*) from {clusters} where decision in ('removed_duplicate', 'matched_reference'))
        """,
    )[0]
    mismatched = fetch_rows(
        connection,
        f"""
        select count(*) from (
          (select doc_id from {deduped}
           except select doc_id from {clusters} where decision = 'kept_representative')
          union all
          (select doc_id from {clusters} where decision = 'kept_representative'
           except select doc_id from {deduped})
        )
        """,
    )[0][0]
    failures = []
    if kept + removed != inputs:
        failures.append(
            f"{counted(kept, 'representative')} + {removed} removed != {counted(inputs, 'input document')}"
        )
    if mismatched:
        failures.append(
            f"{counted(mismatched, 'document')} {'differs' if mismatched == 1 else 'differ'} between deduped_documents "
            "and the representatives in clusters"
        )
    return check_result(
        failures,
        f"{counted(kept, 'representative')} + {removed} removed = {counted(inputs, 'input document')}",
    )


def removals_name_kept_representatives(
    connection: duckdb.DuckDBPyConnection, clusters: str, key: str, earlier: str | None
) -> AssetCheckResult:
    """Each document batch ``key`` removes names, as ``representative_doc_id`` and
    ``representative_batch``, a document kept in that batch: one of ``clusters`` (the batch's
    decisions) or of ``earlier`` (the index's, with ``batch_key``; None before a first batch is
    added). A removal for a document that is not kept, or not in the batch named, leaves the
    cluster without the copy the release promises."""
    index_rows = (
        f"union all select batch_key, doc_id, decision from {earlier} where batch_key <> $key" if earlier else ""
    )
    wrong = connection.execute(
        f"""
        with decided as (select $key as batch_key, doc_id, decision from {clusters} {index_rows})
        select c.doc_id, c.representative_doc_id, c.representative_batch, r.decision
        from {clusters} c
        left join decided r on r.batch_key = c.representative_batch and r.doc_id = c.representative_doc_id
        where c.decision = '{REMOVED}' and r.decision is distinct from '{KEPT}'
        order by c.doc_id
        """,
        {"key": key},
    ).fetchall()
    removed, against_earlier = connection.execute(
        f"select count(*), count(*) filter (where representative_batch <> ?) from {clusters} where decision = '{REMOVED}'",
        [key],
    ).fetchall()[0]
    return check_result(
        [
            f"{doc_id} is removed for {kept} of batch {batch}, which "
            + (f"batch {batch} does not hold" if decision is None else f"is {decision} there")
            for doc_id, kept, batch, decision in wrong
        ],
        f"{counted(removed, 'removed document')}, each for a document kept in the batch it names "
        f"({against_earlier} in earlier batches)",
        removed_against_earlier_batches=MetadataValue.int(int(against_earlier)),
    )


def largest_cluster_within(connection: duckdb.DuckDBPyConnection, clusters: str, max_cluster_size: int) -> AssetCheckResult:
    """No cluster has more than ``max_cluster_size`` documents: a giant cluster is usually a
    chain through shared boilerplate, not one page copied. One without a chained member is one
    page copied (or nearly) that many times, which cluster_mode 'star' would not split: the
    warning says which is which."""
    largest = fetch_rows(
        connection,
        f"""
        select cluster_id, any_value(cluster_size) as size, any_value(representative_doc_id),
               count(*) filter (where chained) as chained
        from {clusters} where cluster_size > 1 and decision <> 'matched_reference'
        group by cluster_id order by size desc, cluster_id limit {SHOWN}
        """,
    )
    size = largest[0][1] if largest else 1
    over = [(cluster_id, size, chained) for cluster_id, size, _, chained in largest if size > max_cluster_size]
    failure = None
    if over:
        said = "; ".join(f"{cluster_id} has {size:,} documents" for cluster_id, size, _ in over)
        failure = f"{said}: more than max_cluster_size={max_cluster_size:,}."
        if any(chained for _, _, chained in over):
            failure += (
                " A cluster this large is usually documents chained through shared boilerplate; "
                "cluster_inspection.csv shows its chained members. cluster_mode 'star' removes only documents "
                "at or above the threshold with the representative; re-materialize clusters and everything downstream."
            )
        copied = [cluster_id for cluster_id, _, chained in over if not chained]
        if copied:
            failure += (
                f" {', '.join(copied)} {'has' if len(copied) == 1 else 'have'} no chained member: every document is "
                "at or above the threshold with the representative, one page copied (or nearly) that many times, "
                "such as an error page or a cookie wall, which cluster_mode 'star' would not split; "
                "raise max_cluster_size to accept such clusters."
            )
    return warning_result(
        failure,
        f"the largest cluster has {counted(size, 'document')}, within max_cluster_size={max_cluster_size:,}",
        largest_cluster_size=MetadataValue.int(int(size)),
        largest_clusters=MetadataValue.md(
            "\n".join(f"- {cluster_id}: {size:,} documents, keeps {kept}" for cluster_id, size, kept, _ in largest)
            or "no multi-member cluster"
        ),
    )


def no_chained_members(connection: duckdb.DuckDBPyConnection, clusters: str, threshold: float) -> AssetCheckResult:
    """No document is removed as a duplicate of a representative it is below the threshold
    with (it joined the cluster through other members)."""
    worst = fetch_rows(
        connection,
        f"""
        select cluster_id, any_value(cluster_size), count(*) filter (where chained) as chained,
               min(jaccard_to_representative) as weakest
        from {clusters} where cluster_size > 1 group by cluster_id having chained > 0
        order by chained desc, weakest, cluster_id
        """,
    )
    total = sum(row[2] for row in worst)
    failure = None
    if total:
        failure = (
            f"{counted(total, 'document')} in {counted(len(worst), 'cluster')} "
            f"{'is' if total == 1 else 'are'} removed with Jaccard below {threshold} with the kept "
            f"representative, chained to it through other members (worst: {worst[0][0]}, "
            f"{worst[0][2]} of {worst[0][1]}, down to {worst[0][3]:.4f}). cluster_mode 'star' keeps them "
            "apart; re-materialize clusters and everything downstream"
        )
    return warning_result(
        failure,
        f"every removed document is at or above Jaccard {threshold} with its representative",
        chained_members=MetadataValue.int(int(total)),
        worst_clusters=MetadataValue.md(
            "\n".join(
                f"- {cluster_id}: {chained} of {size} chained, down to Jaccard {weakest:.4f}"
                for cluster_id, size, chained, weakest in worst[:SHOWN]
            )
            or "none"
        ),
    )


# scored pairs the removals check recomputes with the reference: a kernel or a scored_pairs wrong
# on one removal in 200 goes unseen in 1,000 of them with chance 0.995^1000, under 1%
REFERENCE_SAMPLE = 1_000


def reference_sample(left: pa.Array, right: pa.Array, seed: int, size: int) -> np.ndarray:
    """Positions of the ``size`` pairs (left[i], right[i]) with the smallest hash keyed by
    ``seed``, ascending: which pairs are drawn depends on the pairs and the seed, not on their
    order (ties, of 64-bit hashes, fall to position)."""
    key = str(seed).encode()
    hashes = np.array(
        [
            int.from_bytes(hashlib.blake2b(f"{l}\x1f{r}".encode(), digest_size=8, key=key).digest(), "little")
            for l, r in zip(left.to_pylist(), right.to_pylist())
        ],
        dtype=np.uint64,
    )
    return np.sort(np.argsort(hashes, kind="stable")[:size])


def removals_meet_threshold(
    connection: duckdb.DuckDBPyConnection, tables: Tables, shingling: Shingling, hash_scheme: str, threshold: float,
    cluster_mode: str, sample_seed: int, sample_size: int = REFERENCE_SAMPLE,
) -> AssetCheckResult:
    """Every removed document's exact Jaccard with its representative is at least ``threshold``;
    with cluster_mode components a document below it must be marked chained, and only such a one.
    Two copies of one text (one content hash) count as 1, as in scored_pairs.

    A pair scored_pairs scored keeps its Jaccard there, except a seeded sample of
    ``sample_size`` of them (:func:`reference_sample`), recomputed from the two bodies by
    the reference (``jaccard.reference_pair_jaccard``) and required to equal it: a wrong kernel
    or scored_pairs. Every other pair, whose Jaccard the clusters measured themselves, is
    measured again from the two bodies."""
    removed = connection.sql(sql("removal_scores", tables)).to_arrow_table()
    same = removed.column("same_text").to_numpy().astype(bool)
    stored = removed.column("scored_jaccard").to_numpy(zero_copy_only=False).astype(np.float64)  # NaN: not scored
    scored = ~same & ~np.isnan(stored)
    measure = np.flatnonzero(~same & np.isnan(stored))
    left, right = removed.column("left_doc_id").combine_chunks(), removed.column("right_doc_id").combine_chunks()
    mask = pa.array(scored)
    sample = np.flatnonzero(scored)[
        reference_sample(left.filter(mask), right.filter(mask), sample_seed, sample_size)
    ]
    jaccard = np.where(same, 1.0, stored)
    reference = np.zeros(0)
    if len(measure) or len(sample):  # each body once, read in one scan
        read = np.concatenate([measure, sample])
        involved = pc.unique(pa.concat_arrays([left.take(read), right.take(read)]))
        bodies = document_bodies(connection, tables.documents, involved)
        doc_ids = bodies.column("doc_id").combine_chunks()

        def rows(ids: pa.Array, at: np.ndarray) -> np.ndarray:
            return pc.index_in(ids.take(at), value_set=doc_ids).to_numpy()

        body = bodies.column("body")
        jaccard[measure] = pair_jaccard(body, rows(left, measure), rows(right, measure), shingling, hash_scheme)
        reference = reference_pair_jaccard(body, rows(left, sample), rows(right, sample), shingling)
    # the two agree exactly but for a 64-bit shingle hash collision (fss), one in about 1e11
    disagree = sample[np.abs(reference - stored[sample]) > 1e-9]
    jaccard[sample] = reference
    failures = [
        f"scored_pairs has Jaccard {stored[i]:.4f} for ({left[i]}, {right[i]}), but their bodies give "
        f"{jaccard[i]:.4f} by the reference"
        for i in disagree
    ]
    if failures:  # a wrong verification (its kernel, or the table changed since), not bad data
        failures[0] = (
            "scored_pairs disagrees with the reference Jaccard: re-materialize scored_pairs and everything "
            f"downstream, and report it if it recurs. {failures[0]}"
        )
    chained = removed.column("chained").to_numpy(zero_copy_only=False).astype(bool)
    below = jaccard < threshold
    wrong = below if cluster_mode == "star" else below != chained
    broken = []
    for i in np.flatnonzero(wrong):
        doc_id, kept = removed.column("doc_id")[i], removed.column("representative_doc_id")[i]
        if cluster_mode == "star":
            broken.append(f"{doc_id} is removed for {kept} at Jaccard {jaccard[i]:.4f} < {threshold}")
        elif below[i]:
            broken.append(f"{doc_id} is removed for {kept} at Jaccard {jaccard[i]:.4f} < {threshold} but not marked chained")
        else:
            broken.append(f"{doc_id} is marked chained but is at Jaccard {jaccard[i]:.4f} with {kept}")
    if broken:  # a broken promise of the clustering, not a fault of the data
        broken[0] = (
            f"{cluster_mode} clusters broke their rule: re-materialize clusters, and report it if it recurs. {broken[0]}"
        )
    passed = f"{counted(removed.num_rows, 'removed document')}, each at or above Jaccard {threshold} with its representative"
    if cluster_mode != "star" and below.any():
        passed = (
            f"{counted(removed.num_rows, 'removed document')}: {int((~below).sum())} at or above Jaccard {threshold} with "
            f"the representative, {int(below.sum())} below it and marked chained (see no_chained_members)"
        )
    return check_result(
        failures + broken,
        passed,
        weakest_jaccard=MetadataValue.float(float(jaccard.min())) if len(jaccard) else "nothing removed",
        same_text=MetadataValue.int(int(same.sum())),
        trusted_from_scored_pairs=MetadataValue.int(int(scored.sum()) - len(sample)),
        reference_sample=MetadataValue.int(len(sample)),
        measured_again=MetadataValue.int(len(measure)),
        sample_seed=MetadataValue.int(sample_seed),
        what_it_catches=MetadataValue.md(
            f"The {len(sample):,} sampled scored pairs (the smallest hash of their two doc_ids keyed by "
            f"minhash_seed {sample_seed}) are recomputed by the Python reference, without the kernel: a "
            "Jaccard kernel or a scored_pairs wrong on one removal in 200 is found with chance above "
            f"99%. The {len(measure):,} removals scored_pairs did not score are measured again from "
            "their bodies: a clustering that removed a page below the threshold, or unmarked, is found "
            "every time."
        ),
    )

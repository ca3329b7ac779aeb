"""Connected components of the duplicate edges on Ray Data, for graphs larger than one machine.

Iterative large-star / small-star (Kiveris et al., "Connected Components in MapReduce and
Beyond", SoCC 2014). Each step is a hash-shuffled ``groupby().aggregate(Min)`` or ``join`` with
Arrow kernels in ``map_batches``, so no Python runs per node or per group, and the edge count
never grows. The edges end as one star per component around its smallest doc_id, every
member's root.

A round is a large-star step then a small-star step, repeated until a whole round leaves the
edge set unchanged. Comparing the two halves of one round instead stops too early: on the path
a-b-c-d, small-star changes nothing after the first large-star, yet d still hangs from b.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa
import pyarrow.compute as pc
import ray.data
from ray.data.aggregate import Min

# lo < hi in byte order; large strings are what Ray's joins return
EDGES = pa.schema([("lo", pa.large_string()), ("hi", pa.large_string())])
ROOTS = pa.schema([("doc_id", pa.string()), ("root_doc_id", pa.string())])


def connected_components(
    edges: ray.data.Dataset,
    *,
    num_partitions: int,
    max_rounds: int = 100,
    log: Callable[[str], None] = lambda message: None,
) -> ray.data.Dataset:
    """``doc_id``, ``root_doc_id`` for every document of an edge (``left_doc_id`` <
    ``right_doc_id``, duplicates allowed): the root is the smallest doc_id of its component.
    Raises RuntimeError if the edges are not stars after ``max_rounds`` rounds."""
    renamed = edges.map_batches(
        lambda t: _edges(t["left_doc_id"], t["right_doc_id"]), batch_format="pyarrow"
    )
    current = _distinct(renamed, num_partitions).materialize()
    count = current.count()
    if count == 0:  # Ray Data's aggregates of no rows have no columns: answer here
        return ray.data.from_arrow(ROOTS.empty_table())
    for round_number in range(1, max_rounds + 1):
        large = _large_star(current, num_partitions).materialize()
        stepped = _small_star(large, num_partitions).materialize()
        stepped_count = stepped.count()
        log(f"connected components: round {round_number}, {stepped_count} edges")
        # both are sets: as many edges and none new means the same edges
        if stepped_count == count and _not_in(stepped, current, num_partitions).count() == 0:
            return _roots(stepped, num_partitions)
        current, count = stepped, stepped_count
    raise RuntimeError(
        f"connected components did not converge in {max_rounds} rounds ({count} edges left); "
        "raise max_rounds"
    )


def _edges(lo: pa.ChunkedArray, hi: pa.ChunkedArray) -> pa.Table:
    return pa.table({"lo": lo, "hi": hi}).cast(EDGES)


def _not_in(
    edges: ray.data.Dataset, old: ray.data.Dataset, num_partitions: int
) -> ray.data.Dataset:
    return edges.join(old, join_type="left_anti", num_partitions=num_partitions, on=("lo", "hi"))


def _distinct(edges: ray.data.Dataset, num_partitions: int) -> ray.data.Dataset:
    # grouped without an aggregation: each (lo, hi) once
    return edges.groupby(["lo", "hi"], num_partitions=num_partitions).aggregate()


def _smaller_neighbour(edges: ray.data.Dataset, num_partitions: int) -> ray.data.Dataset:
    """Each node with a smaller neighbour (``hi``) and its smallest (``m``)."""
    return edges.groupby("hi", num_partitions=num_partitions).aggregate(Min("lo", alias_name="m"))


def _large_star(edges: ray.data.Dataset, num_partitions: int) -> ray.data.Dataset:
    """Every node's larger neighbours move to its smallest neighbour (or itself)."""
    smallest = _smaller_neighbour(edges, num_partitions)
    joined = edges.join(
        smallest,
        join_type="left_outer",
        num_partitions=num_partitions,
        on=("lo",),
        right_on=("hi",),
    )
    # m is null for a node without a smaller neighbour: it is its own smallest
    return joined.map_batches(
        lambda t: _edges(pc.coalesce(t["m"], t["lo"]), t["hi"]), batch_format="pyarrow"
    )


def _small_star(edges: ray.data.Dataset, num_partitions: int) -> ray.data.Dataset:
    """Every node and its smaller neighbours attach to the smallest of them."""
    smallest = _smaller_neighbour(edges, num_partitions)
    joined = edges.join(smallest, join_type="inner", num_partitions=num_partitions, on=("hi",))

    def attach(t: pa.Table) -> pa.Table:
        others = t.filter(pc.not_equal(t["lo"], t["m"]))
        return pa.concat_tables([_edges(others["m"], others["lo"]), _edges(t["m"], t["hi"])])

    return _distinct(joined.map_batches(attach, batch_format="pyarrow"), num_partitions)


def _roots(stars: ray.data.Dataset, num_partitions: int) -> ray.data.Dataset:
    """Each leaf's root is its star's centre, and each centre is its own root."""

    def rows(t: pa.Table) -> pa.Table:
        leaves = pa.table({"doc_id": t["hi"], "root_doc_id": t["lo"]})
        centres = pa.table({"doc_id": t["lo"], "root_doc_id": t["lo"]})
        return pa.concat_tables([leaves, centres]).cast(ROOTS)

    # grouped, since a centre comes once for each of its leaves
    pairs = stars.map_batches(rows, batch_format="pyarrow")
    return pairs.groupby("doc_id", num_partitions=num_partitions).aggregate(
        Min("root_doc_id", alias_name="root_doc_id")
    )

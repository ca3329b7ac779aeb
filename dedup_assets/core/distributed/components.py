"""Connected components of the duplicate edges on Daft (its Ray runner), for graphs larger than
one machine.

Iterative large-star / small-star (Kiveris et al., "Connected Components in MapReduce and
Beyond", SoCC 2014). Each step is one of Daft's hash-shuffled groupings (the smallest smaller
neighbour of each node) and a join, so no Python runs per node or per group, and the edge count
never grows. The edges end as one star per component around its smallest doc_id, every
member's root.

A round is a large-star step then a small-star step, repeated until a whole round leaves the
edge set unchanged. Comparing the two halves of one round instead stops too early: on the path
a-b-c-d, small-star changes nothing after the first large-star, yet d still hangs from b.

Each half-step's edges are written as Parquet to a scratch folder and read back by the next: a
lazy plan over the rounds before would run them all again at every round (and twice per
half-step, since each reads its input twice), and files keep the edges on the workers' side,
where ``.collect()`` would bring them to this process.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

import daft
import pyarrow as pa
from daft import col
from daft.functions import coalesce, to_list

from .datasets import table_folder, table_rows
from .daft_tables import frame, write_frames
from .ray_tables import RayTables

# lo < hi in byte order
EDGES = pa.schema([("lo", pa.string()), ("hi", pa.string())])
ROOTS = pa.schema([("doc_id", pa.string()), ("root_doc_id", pa.string())])
# scratch's table of the roots
ROOTS_TABLE = "roots"


def connected_components(
    edges: daft.DataFrame,
    scratch: RayTables,
    *,
    max_rounds: int = 100,
    log: Callable[[str], None] = lambda message: None,
) -> None:
    """Write ``scratch``'s table ``ROOTS_TABLE``: ``doc_id``, ``root_doc_id`` (``ROOTS``) for every
    document of an edge (``left_doc_id`` < ``right_doc_id``, duplicates allowed), the root the
    smallest doc_id of its component. The rounds' edges are tables of ``scratch`` while they are
    read, removed after. Raises RuntimeError if the edges are not stars after ``max_rounds``
    rounds."""
    written: list[str] = []

    def step(name: str, edges: daft.DataFrame) -> tuple[daft.DataFrame, int]:
        """``edges`` written as ``name``, read back, and its row count (from the files' footers);
        the table three steps before is no longer read (a round's check reads the edges before
        its large-star's), and goes."""
        write_frames(scratch.root, name, [edges], EDGES)
        written.append(name)
        if len(written) > 3:
            shutil.rmtree(table_folder(scratch.root, written.pop(0)))
        return frame(scratch.root, name), table_rows(scratch.root, name)

    try:
        start = edges.select(col("left_doc_id").alias("lo"), col("right_doc_id").alias("hi")).distinct()
        current, count = step("edges-0", start)
        for round_number in range(1, max_rounds + 1):
            large, _ = step(f"large-{round_number}", _large_star(current))
            stepped, stepped_count = step(f"edges-{round_number}", _small_star(large))
            log(f"connected components: round {round_number}, {stepped_count} edges")
            # both are sets: as many edges and none new means the same edges
            if stepped_count == count and not stepped.join(current, on=["lo", "hi"], how="anti").count_rows():
                write_frames(scratch.root, ROOTS_TABLE, [_roots(stepped)], ROOTS)
                return
            current, count = stepped, stepped_count
    finally:
        for name in written:
            shutil.rmtree(table_folder(scratch.root, name), ignore_errors=True)
    raise RuntimeError(
        f"connected components did not converge in {max_rounds} rounds ({count} edges left); "
        "raise max_rounds"
    )


def _smaller_neighbour(edges: daft.DataFrame) -> daft.DataFrame:
    """Each node with a smaller neighbour (``hi``) and its smallest (``m``)."""
    return edges.groupby("hi").agg(col("lo").min().alias("m"))


def _large_star(edges: daft.DataFrame) -> daft.DataFrame:
    """Every node's larger neighbours move to its smallest neighbour (or itself)."""
    smallest = _smaller_neighbour(edges).select(col("hi").alias("lo"), col("m"))
    joined = edges.join(smallest, on="lo", how="left")
    # m is null for a node without a smaller neighbour: it is its own smallest
    return joined.select(coalesce(col("m"), col("lo")).alias("lo"), col("hi"))


def _small_star(edges: daft.DataFrame) -> daft.DataFrame:
    """Every node and its smaller neighbours attach to the smallest of them."""
    joined = edges.join(_smaller_neighbour(edges), on="hi")
    # each row gives (m, lo) unless lo is m, and (m, hi): two edges from m, in one pass
    attached = joined.select(col("m").alias("lo"), to_list(col("lo"), col("hi")).alias("hi")).explode("hi")
    return attached.where(col("hi") != col("lo")).distinct()


def _roots(stars: daft.DataFrame) -> daft.DataFrame:
    """Each leaf's root is its star's centre, and each centre is its own root (grouped, since a
    centre comes once for each of its leaves)."""
    members = stars.select(to_list(col("lo"), col("hi")).alias("doc_id"), col("lo").alias("root_doc_id")).explode("doc_id")
    return members.groupby("doc_id").agg(col("root_doc_id").min())

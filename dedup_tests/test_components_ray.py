"""Connected components on Daft (large-star / small-star) on a real two-node Ray cluster,
checked against networkx (the DuckDB engine's components) and a union-find, and against the
early stop of comparing half-steps."""

from __future__ import annotations

import random

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dedup_assets.core.cluster.components import edge_components

pytestmark = pytest.mark.ray


def components(edges, tmp_path, log=lambda message: None, **options):
    """The roots ``connected_components`` writes for ``edges``, read from its folder, which
    holds nothing else once it returns (the rounds' edges are removed)."""
    import daft  # the ray tier's tests import Ray (and Daft on it) only once the ray_cluster fixture has it

    from dedup_assets.core.distributed.components import ROOTS_TABLE, connected_components
    from dedup_assets.core.distributed.datasets import read_table
    from dedup_assets.core.distributed.ray_tables import RayTables
    from dedup_assets.core.distributed.session import ray_session

    frame = daft.from_pydict(
        {
            "left_doc_id": pa.array([left for left, _ in edges], pa.string()),
            "right_doc_id": pa.array([right for _, right in edges], pa.string()),
        }
    )
    scratch = RayTables(tmp_path / "scratch", 2)
    with ray_session(None):  # Daft's runner on the fixture's cluster
        try:
            connected_components(frame, scratch, log=log, **options)
        finally:
            left = sorted(path.name for path in scratch.root.iterdir() if not path.name.startswith("."))
            assert left in ([], [ROOTS_TABLE]), left
    table = read_table(scratch.root, ROOTS_TABLE)
    assert table.schema.names == ["doc_id", "root_doc_id"]
    mapping = dict(zip(table["doc_id"].to_pylist(), table["root_doc_id"].to_pylist()))
    assert len(mapping) == table.num_rows, "a document appears twice"
    return mapping


def networkx_roots(edges):
    """Each document's root as the DuckDB engine's components give it (networkx)."""
    roots = edge_components(edges)
    return dict(zip(roots["doc_id"].to_pylist(), roots["root_doc_id"].to_pylist()))


def union_find(edges):
    parent = {}

    def find(node):
        while parent.setdefault(node, node) != node:
            node = parent[node]
        return node

    for left, right in edges:
        a, b = find(left), find(right)
        parent[max(a, b)] = min(a, b)  # Python compares str by code point: UTF-8 byte order
    return {node: find(node) for node in parent}


SIZES = {"chain": (20, 80), "star": (3, 30), "cycle": (3, 20), "edge": (2, 2)}


def random_graph(seed, nodes=300):
    """Long chains, stars, cycles and isolated edges over ids of 1 to 6 digits ('10' < '9'),
    with a few edges between pieces and some edges twice."""
    rng = random.Random(seed)
    ids = set()
    while len(ids) < nodes:
        ids.add(str(rng.randrange(10 ** rng.randint(1, 6))))
    ids = sorted(ids)
    rng.shuffle(ids)
    pairs = []
    while ids:
        shape = rng.choice(["chain", "chain", "star", "cycle", "edge"])
        size = rng.randint(*SIZES[shape])
        piece, ids = ids[:size], ids[size:]
        if shape == "star":
            pairs += [(piece[0], leaf) for leaf in piece[1:]]
        else:
            pairs += list(zip(piece, piece[1:]))
            if shape == "cycle" and len(piece) > 2:
                pairs.append((piece[-1], piece[0]))
    nodes_seen = sorted({node for pair in pairs for node in pair})
    pairs += [tuple(rng.sample(nodes_seen, 2)) for _ in range(3)]
    pairs += rng.sample(pairs, 10)
    edges = [(min(pair), max(pair)) for pair in pairs]
    rng.shuffle(edges)
    return edges


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_random_graphs_match_union_find(ray_cluster, tmp_path, seed):
    edges = random_graph(seed)
    assert components(edges, tmp_path) == union_find(edges)


def chain(ids):
    return [(min(pair), max(pair)) for pair in zip(ids, ids[1:])]


# a chain of 40 whose ids go up and down in byte order (so no node's smallest neighbour is its
# root), a star around a centre that is not its smallest id, a cycle, and an isolated edge
CHAIN = chain([f"c{(index * 17) % 40:02d}" for index in range(40)])
STAR = [(min("s5", leaf), max("s5", leaf)) for leaf in ["s0", "s1", "s7", "s8", "s9"]]
CYCLE = [("y1", "y2"), ("y2", "y3"), ("y1", "y3")]
SHAPES = {"chain": CHAIN, "star": STAR, "isolated edge": [("e1", "e2")], "several": CHAIN + STAR + CYCLE + [("e1", "e2")]}


@pytest.mark.parametrize("shape", SHAPES, ids=list(SHAPES))
def test_shapes_match_networkx(ray_cluster, tmp_path, shape):
    rounds = []
    roots = components(SHAPES[shape], tmp_path, log=rounds.append)
    assert roots == networkx_roots(SHAPES[shape])
    if shape in ("chain", "several"):  # the chain's 40 nodes take several rounds to become a star
        assert len(rounds) > 3, rounds


# --- the half-step stop rule, in plain Python -------------------------------------------------


def large_star(edges):
    smallest = {}
    for lo, hi in edges:
        smallest[hi] = min(smallest.get(hi, hi), lo)
    return {(smallest.get(lo, lo), hi) for lo, hi in edges}


def small_star(edges):
    smallest = {}
    for lo, hi in edges:
        smallest[hi] = min(smallest.get(hi, hi), lo)
    attached = {(smallest[hi], lo) for lo, hi in edges if lo != smallest[hi]}
    return attached | {(m, hi) for hi, m in smallest.items()}


def roots_of(edges):
    roots = {}
    for lo, hi in edges:
        roots[hi] = min(roots.get(hi, hi), lo)
        roots.setdefault(lo, lo)
    return roots


def stop_when_halves_agree(edges):
    """The bug: stop as soon as small-star leaves large-star's output unchanged."""
    edges = set(edges)
    while True:
        large = large_star(edges)
        edges = small_star(large)
        if edges == large:
            return edges


# Found by a one-off exhaustive search over every graph on 2 to 6 nodes (33,861 graphs), running
# large-star / small-star in plain Python with both stop rules: the whole-round rule was right on
# all of them; the half-step rule was wrong on 498, the smallest being the path 0-1-2-3, here
# relabelled to ids whose byte order ('10' < '7' < '8' < '9') is not their numeric order.
PATH = [("10", "7"), ("7", "8"), ("8", "9")]


def test_half_step_rule_stops_early_on_the_path():
    stopped = stop_when_halves_agree(PATH)
    # after one round: 9 still hangs from 7
    assert stopped == {("10", "7"), ("10", "8"), ("7", "9")}
    assert roots_of(stopped) != union_find(PATH)
    assert roots_of(stopped)["9"] == "7"


def test_whole_round_rule_goes_on_until_stars(ray_cluster, tmp_path):
    rounds = []
    assert components(PATH, tmp_path, log=rounds.append) == {"10": "10", "7": "10", "8": "10", "9": "10"}
    # round 1 gives the half-step rule's answer, round 2 the stars, round 3 sees no change
    assert len(rounds) == 3, rounds


def test_too_many_rounds_raise(ray_cluster, tmp_path):
    with pytest.raises(RuntimeError, match="did not converge in 1 rounds"):
        components(PATH, tmp_path, max_rounds=1)


def test_no_edges_no_rows(ray_cluster, tmp_path):
    assert components([], tmp_path) == {}


def test_duplicate_edges(ray_cluster, tmp_path):
    twice = [("b", "c"), ("a", "b"), ("b", "c"), ("a", "b")]
    assert components(twice, tmp_path) == {"a": "a", "b": "a", "c": "a"}


@pytest.mark.parametrize("budget, where", [(10_000, "on this node"), (0, "on the cluster")])
def test_the_edge_budget_picks_where_components_run(ray_cluster, tmp_path, budget, where):
    from dedup_assets.core.distributed.datasets import table_folder
    from dedup_assets.core.distributed.ray_clusters import _accepted_edges, _component_roots
    from dedup_assets.core.distributed.ray_tables import RayTables
    from dedup_assets.core.distributed.session import ray_session

    edges = random_graph(7)
    # an lsh_via_copy edge adds nothing (its copy hangs from its first copy by other edges), so
    # the graph leaves it out: these two documents, of no other edge, get no root
    apart = ("copy-a", "copy-b")
    folder = table_folder(tmp_path, "duplicate_pairs")
    folder.mkdir(parents=True)
    pq.write_table(
        pa.table(
            {
                "left_doc_id": [left for left, _ in edges] + [apart[0]],
                "right_doc_id": [right for _, right in edges] + [apart[1]],
                "found_by": ["lsh"] * len(edges) + ["lsh_via_copy"],
            }
        ),
        folder / "part-0.parquet",
    )
    messages = []
    with ray_session(None):  # Daft's runner on the fixture's cluster
        tables = RayTables(tmp_path, 2)
        accepted = _accepted_edges(tables, None)
        roots = _component_roots(
            tables, RayTables(tmp_path / "scratch", 2), accepted, accepted.count_rows(), pa.array([], pa.string()), budget,
            messages.append,
        )
        table = roots.to_arrow()
    assert table.column_names == ["doc_id", "root_doc_id"]
    assert dict(zip(table["doc_id"].to_pylist(), table["root_doc_id"].to_pylist())) == union_find(edges)
    assert where in messages[0], messages

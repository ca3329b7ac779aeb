"""Pictures of a run, as PNG bytes: the LSH S-curve of the bands in use, the candidates' exact
Jaccard, and the cluster sizes. Each is drawn from a few aggregate rows computed in DuckDB, so a
large corpus costs no more than a small one. The same bytes go into asset metadata (as Markdown
images) and into the release folder; identical inputs give identical files.
"""

from __future__ import annotations

import base64
import io

from typing import TYPE_CHECKING

import duckdb
import numpy as np

from ..lsh.scurve import lsh_probability
from ..storage.tables import Tables

if TYPE_CHECKING:  # matplotlib is imported where a picture is drawn: a second of every start else
    from matplotlib.figure import Figure

SCURVE_FILE = "scurve.png"
JACCARD_FILE = "jaccard_histogram.png"
CLUSTER_SIZES_FILE = "cluster_sizes.png"
BOILERPLATE_FILE = "boilerplate.png"
# Jaccard histogram bins over [0, 1]
JACCARD_BINS = 50
FIGURE_SIZE = (6.4, 3.6)  # inches, at DPI
DPI = 100


def new_axes(size: tuple[float, float] = FIGURE_SIZE):
    """A figure and its axes, drawn by Agg into memory: matplotlib's own Figure, not pyplot's,
    so no display backend is loaded and no global figure is kept."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=size)
    return figure, figure.subplots()


def png_bytes(figure: Figure) -> bytes:
    """The figure as PNG bytes, without the matplotlib version in its metadata (so that the file
    depends on the data only)."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=DPI, metadata={"Software": None})
    return buffer.getvalue()


def markdown_image(png: bytes, title: str) -> str:
    """Markdown that shows the picture inline (Dagster's UI renders data URIs)."""
    return f"![{title}](data:image/png;base64,{base64.b64encode(png).decode('ascii')})"


def scurve_png(threshold: float, bands: int, rows_per_band: int, auto_bands: bool) -> bytes:
    """P(candidate | J) for the bands in use, with the threshold and P at t and t ± 0.1."""
    similarity = np.linspace(0.0, 1.0, 401)
    figure, axes = new_axes()
    axes.plot(similarity, lsh_probability(similarity, bands, rows_per_band), color="#1f77b4")
    axes.axvline(threshold, color="#d62728", linestyle="--", linewidth=1)
    for point in (threshold - 0.1, threshold, threshold + 0.1):
        if 0.0 <= point <= 1.0:
            chance = lsh_probability(point, bands, rows_per_band)
            axes.plot([point], [chance], "o", color="#d62728" if point == threshold else "#555555")
            axes.annotate(f"J={point:.2f}: P={chance:.2f}", (point, chance), textcoords="offset points",
                          xytext=(6, -12 if point > threshold else 6), fontsize=8)
    chosen = " (chosen by auto_bands)" if auto_bands else ""
    axes.set_title(f"LSH S-curve: {bands} bands x {rows_per_band} rows{chosen}", fontsize=10)
    axes.set_xlabel("exact Jaccard of a pair")
    axes.set_ylabel("P(candidate)")
    axes.set_xlim(0, 1)
    axes.set_ylim(0, 1.02)
    axes.grid(alpha=0.3)
    figure.tight_layout()
    return png_bytes(figure)


def jaccard_histogram_png(connection: duckdb.DuckDBPyConnection, tables: Tables, threshold: float) -> bytes:
    """The candidates' exact Jaccard in JACCARD_BINS bins, with the threshold line."""
    counts = np.zeros(JACCARD_BINS, dtype=np.int64)
    for bin_index, pairs in connection.execute(
        f"select least(floor(jaccard * $bins), $bins - 1)::integer, count(*) from {tables.scored_pairs} group by 1",
        {"bins": JACCARD_BINS},
    ).fetchall():
        counts[bin_index] = pairs
    figure, axes = new_axes()
    edges = np.linspace(0.0, 1.0, JACCARD_BINS + 1)
    below = edges[:-1] + 1e-9 < threshold
    axes.bar(edges[:-1], counts, width=1.0 / JACCARD_BINS, align="edge",
             color=np.where(below, "#aaaaaa", "#1f77b4"), edgecolor="white", linewidth=0.3)
    axes.axvline(threshold, color="#d62728", linestyle="--", linewidth=1, label=f"threshold {threshold}")
    axes.set_title(f"Exact Jaccard of {int(counts.sum()):,} candidate pairs", fontsize=10)
    axes.set_xlabel("exact shingle Jaccard")
    axes.set_ylabel("pairs")
    axes.set_xlim(0, 1)
    axes.legend(fontsize=8)
    figure.tight_layout()
    return png_bytes(figure)


def cluster_sizes_png(connection: duckdb.DuckDBPyConnection, tables: Tables) -> bytes:
    """How many clusters have each size, on log scales."""
    rows = connection.execute(  # a cluster of size s has s rows: no distinct count needed
        f"select cluster_size, count(*) // cluster_size from {tables.clusters} group by 1 order by 1"
    ).fetchall()
    sizes = np.array([size for size, _ in rows], dtype=np.int64)
    clusters = np.array([count for _, count in rows], dtype=np.int64)
    figure, axes = new_axes()
    # on log axes a bar as wide as a fifth of its size looks the same at every size
    axes.bar(sizes, clusters, width=0.2 * sizes, color="#1f77b4")
    axes.set_xscale("log")
    axes.set_yscale("log")
    axes.set_ylim(bottom=0.8)
    from matplotlib import ticker

    plain = ticker.FuncFormatter(lambda value, _: f"{value:,.0f}")
    for axis in (axes.xaxis, axes.yaxis):
        axis.set_major_locator(ticker.LogLocator(subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(plain)
        axis.set_minor_formatter(ticker.NullFormatter())
    if 0 < len(sizes) <= 12:  # few sizes: name each one
        axes.xaxis.set_major_locator(ticker.FixedLocator(sizes))
    axes.set_title(f"Cluster sizes: {int(clusters.sum()):,} clusters, largest {int(sizes.max()) if len(sizes) else 0:,}",
                   fontsize=10)
    axes.set_xlabel("documents in the cluster")
    axes.set_ylabel("clusters")
    axes.grid(alpha=0.3, which="both")
    figure.tight_layout()
    return png_bytes(figure)


def boilerplate_png(passages: list[tuple[str, float]]) -> bytes:
    """The most shared passages (text, share of the sampled documents), as horizontal bars."""
    figure, axes = new_axes()
    labels = [(text[:48] + "…") if len(text) > 48 else text for text, _ in passages][::-1]
    axes.barh(range(len(passages)), [share * 100 for _, share in passages][::-1], color="#d62728")
    axes.set_yticks(range(len(passages)), labels, fontsize=7)
    axes.set_xlim(0, 100)
    axes.set_xlabel("% of the sampled documents")
    axes.set_title("Shared passages (boilerplate)" if passages else "No shared passage", fontsize=10)
    axes.grid(alpha=0.3, axis="x")
    figure.tight_layout()
    return png_bytes(figure)

"""The compiled tokenizer must agree with the specification's Python normalization."""

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_assets.core import kernels
from dedup_assets.core.settings import SketchParams
from dedup_assets.core.sketch import fingerprint_batch
from dedup_assets.core.text import kernel_text, normalize_text, token_shingles, tokenize

FSS = SketchParams("fss", 5, 64, 8, 42)
ascii_text = st.text(alphabet=st.characters(max_codepoint=127), max_size=300)
unicode_text = st.text(max_size=200)
# the Basic Multilingual Plane without capital sigma: what the code-point table normalizes
table_text = st.text(
    alphabet=st.characters(max_codepoint=0xFFFF, blacklist_categories=("Cs",), blacklist_characters="\u03a3"),
    max_size=200,
)
web_like = st.lists(
    st.sampled_from(["Café", "RÉSUMÉ", "数据", "，", "。", "_", "—", "naïve", "Ünïcödé", "ﬁle", "x1", "  ", "\t", "Straße", "!?", "e\u0301"]),
    max_size=60,
).map("".join)


def _fingerprints(texts: list[str]):
    return fingerprint_batch(pa.array([str(i) for i in range(len(texts))]), pa.array(texts), FSS)


def _reference_fingerprints(texts: list[str]):
    """The kernel over ``normalize_text`` output, told it is normalized: it only splits on
    spaces and hashes bytes, so neither the ASCII classes nor the code-point table take part."""
    normalized = kernel_text(pa.array([normalize_text(text) for text in texts]))
    every = np.ones(len(texts), dtype=np.bool_)
    return kernels.fingerprint_kernel(
        normalized._replace(prenormalized=every), 5, kernels.round_seeds(64, 42), 8, 4
    )


def _agrees(text: str) -> None:
    batch = _fingerprints([text])
    token_counts, shingle_counts, content, signatures, _ = _reference_fingerprints([text])
    tokens = tokenize(normalize_text(text))
    assert batch.column("token_count")[0].as_py() == len(tokens) == token_counts[0]
    assert batch.column("shingle_count")[0].as_py() == len(token_shingles(tokens, 5)) == shingle_counts[0]
    # the same token sequence: raw text and its reference normalization hash identically
    assert batch.column("content_hash")[0].as_py() == content[0]
    assert batch.column("signature")[0].as_py() == signatures[0].tolist()


@settings(max_examples=300, deadline=None)
@given(ascii_text)
def test_ascii_fast_path_matches_reference(text):
    _agrees(text)


@settings(max_examples=200, deadline=None)
@given(unicode_text)
def test_any_unicode_matches_reference(text):
    _agrees(text)


@settings(max_examples=200, deadline=None)
@given(web_like)
def test_accents_cjk_and_full_width_punctuation_match_reference(text):
    _agrees(text)


@settings(max_examples=300, deadline=None)
@given(table_text)
def test_code_point_table_matches_reference(text):
    _agrees(text)


def test_every_code_point_of_the_table_matches_reference():
    # each character between letters and before a space, so joining and splitting both show
    texts = [f"Ab{chr(cp)}cD e{chr(cp)} f" for cp in range(0x80, 0x10000) if not 0xD800 <= cp < 0xE000]
    batch = _fingerprints(texts)
    token_counts, _, content, _, _ = _reference_fingerprints(texts)
    assert batch.column("token_count").to_numpy().tolist() == token_counts.tolist()
    mismatched = [texts[i] for i in np.flatnonzero(batch.column("content_hash").to_numpy() != content)]
    assert not mismatched, mismatched[:5]


def test_capital_sigma_and_astral_characters_take_the_reference():
    for text in ["ΟΔΟΣ ΟΔΟΣ", "ΣΑΣ", "emoji 😀 inside", "𝐀𝐁𝐂 math bold", "mixed Σ and 😀"]:
        _agrees(text)

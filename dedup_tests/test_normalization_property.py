"""The compiled tokenizer must agree with the specification's Python normalization."""

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_assets.core.fingerprint import SketchParams, fingerprint_batch
from dedup_assets.core.text import normalize_text, token_shingles, tokenize

FSS = SketchParams("fss", 5, 64, 8, 42)
ascii_text = st.text(alphabet=st.characters(max_codepoint=127), max_size=300)
unicode_text = st.text(max_size=200)
web_like = st.lists(
    st.sampled_from(["Café", "RÉSUMÉ", "数据", "，", "。", "_", "—", "naïve", "Ünïcödé", "ﬁle", "x1", "  ", "\t", "Straße", "!?", "e\u0301"]),
    max_size=60,
).map("".join)


def _fingerprints(texts: list[str]):
    return fingerprint_batch(pa.array([str(i) for i in range(len(texts))]), pa.array(texts), FSS)


def _agrees(text: str) -> None:
    reference = normalize_text(text)
    batch = _fingerprints([text, reference])
    tokens = tokenize(reference)
    assert batch.column("token_count")[0].as_py() == len(tokens)
    assert batch.column("shingle_count")[0].as_py() == len(token_shingles(tokens, 5))
    # the same token sequence: raw text and its reference normalization hash identically
    assert batch.column("content_hash")[0].as_py() == batch.column("content_hash")[1].as_py()
    assert batch.column("signature")[0].as_py() == batch.column("signature")[1].as_py()


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

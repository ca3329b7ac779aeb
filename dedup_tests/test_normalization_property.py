"""The compiled tokenizer must agree with the specification's Python normalization."""

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from dedup_assets.core.sketch import kernels
from dedup_assets.core.pipeline.step_params import SketchParams
from dedup_assets.core.sketch.fingerprints import fingerprint_batch, tokenless_keys
from dedup_assets.core.text.normalize import kernel_text, normalize_text, token_shingles, tokenize

FSS = SketchParams("fss", 5, 64, 8, 42)
FSS_CHARACTERS = SketchParams("fss", 3, 64, 8, 42, shingle_unit="char")
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
# scripts whose marks are letters, written precomposed and decomposed, with marks in any order
# (canonical reordering and composition cross code points there), beside accents and Han
marked_scripts = st.lists(
    st.sampled_from(
        [
            "では", "て\u3099", "か", "\u3099", "\u309a", "ハ\u309a", "กรุงเทพ", "\u0e38", "\u0e48", "\u0e39\u0e49",
            "हिन्दी", "\u093c", "\u094d", "क\u093c", "ক\u09be", "한국어", "\u1100\u1161", "\u11a8", "שָׁלוֹם",
            "\u05b8\u05c1", "آ", "ا\u0653", "e\u0301\u0323", "\u0323\u0301", "中文", " ", "，", "x",
            "\u09c7", "\u09be", "\u09d7", "\u0b47", "\u0b3e", "\u0bc6", "\u0bbe", "\u0928", "\uac00", "\u11a8",
            # ideographic tone marks (classes 218-224) share their block with 。「」
            "。", "「", "\u302a", "\u302e", "漢\u302b",
        ]
    ),
    max_size=40,
).map("".join)


def _fingerprints(texts: list[str], params: SketchParams = FSS):
    return fingerprint_batch(pa.array([str(i) for i in range(len(texts))]), pa.array(texts), params)


def _reference_fingerprints(texts: list[str], params: SketchParams = FSS):
    """The kernel over ``normalize_text`` output, told it is normalized: it only splits on
    spaces and hashes bytes, so neither the ASCII classes nor the code-point table take part."""
    normalized = kernel_text(pa.array([normalize_text(text) for text in texts]), params.shingle_unit)
    every = np.ones(len(texts), dtype=np.bool_)
    return kernels.fingerprint_kernel(
        normalized._replace(prenormalized=every),
        params.shingle_size,
        kernels.round_seeds(params.num_perm, params.minhash_seed),
        params.rows_per_band,
        4,
        kernels.NO_PROBES,
        kernels.NO_PROBE_FILTER,
    )


def _agrees(text: str, params: SketchParams = FSS) -> None:
    batch = _fingerprints([text], params)
    token_counts, shingle_counts, content, signatures, *_ = _reference_fingerprints([text], params)
    tokens = tokenize(normalize_text(text), params.shingle_unit)
    shingles = token_shingles(tokens, params.shingle_size, params.shingle_unit)
    assert batch.column("token_count")[0].as_py() == len(tokens) == token_counts[0]
    assert batch.column("shingle_count")[0].as_py() == len(shingles) == shingle_counts[0]
    # the same token sequence: raw text and its reference normalization hash identically; a text
    # without a token is keyed by its characters instead
    expected = content[0] if len(tokens) else tokenless_keys(pa.array([text], pa.string()), 1)[0][0]
    assert batch.column("content_hash")[0].as_py() == expected
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


@settings(max_examples=300, deadline=None)
@given(marked_scripts)
def test_marks_that_are_letters_match_reference_in_any_order(text):
    _agrees(text)
    _agrees(text, FSS_CHARACTERS)


@settings(max_examples=200, deadline=None)
@given(unicode_text)
def test_character_unit_matches_reference(text):
    _agrees(text, FSS_CHARACTERS)


@settings(max_examples=200, deadline=None)
@given(ascii_text)
def test_character_unit_ascii_fast_path_matches_reference(text):
    _agrees(text, FSS_CHARACTERS)


def test_text_as_written_in_many_scripts_stays_in_the_kernels():
    texts = [
        "中文网页的正文，包括标点。", "東京タワーへ行きます", "กรุงเทพมหานครเตรียม", "हिन्दी भाषा, ज़िंदगी बड़ी",
        "কলকাতা শহরের মানুষ", "தமிழ் மொழி பேசுகிறார்கள்", "ಕನ್ನಡ ಭಾಷೆ", "한국어", "Café", "ন\u09bc",
        "「中文」、网页。", "中\u302a文。",
    ]
    assert not kernel_text(pa.array(texts)).prenormalized.any()
    # what needs the reference: a mark written apart from the letter it composes with (kana
    # voicing, a Bengali two-part vowel, a Hangul vowel after its consonant), marks out of order
    # (ideographic tone marks out of order, at a page's end and within it)
    flagged = kernel_text(
        pa.array(["て\u3099", "\u09c7\u09be", "\u1100\u1161", "\u0e48\u0e38", "ΣΑΣ", "中\u302e\u302a", "。\u302e\u302a文"])
    )
    assert flagged.prenormalized.tolist() == [True] * 7


def test_every_code_point_of_the_table_matches_reference():
    # each character between letters and before a space, so joining and splitting both show
    texts = [f"Ab{chr(cp)}cD e{chr(cp)} f" for cp in range(0x80, 0x10000) if not 0xD800 <= cp < 0xE000]
    for params in (FSS, FSS_CHARACTERS):
        batch = _fingerprints(texts, params)
        token_counts, _, content, *_ = _reference_fingerprints(texts, params)
        assert batch.column("token_count").to_numpy().tolist() == token_counts.tolist()
        mismatched = [texts[i] for i in np.flatnonzero(batch.column("content_hash").to_numpy() != content)]
        assert not mismatched, mismatched[:5]


def test_capital_sigma_and_astral_characters_take_the_reference():
    for text in ["ΟΔΟΣ ΟΔΟΣ", "ΣΑΣ", "emoji 😀 inside", "𝐀𝐁𝐂 math bold", "mixed Σ and 😀"]:
        _agrees(text)

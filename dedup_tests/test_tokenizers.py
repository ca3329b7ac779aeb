"""The tokenizer registry (``core/text/tokenizers/``) is the one list of shingle units: the settings
take its names, and a tokenizer registered from outside the library runs through the reference
(blake2b) and the kernels (fss) alike, without a change to ``kernels.py``."""

from dataclasses import fields
from typing import get_args, get_type_hints

import numba as nb
import numpy as np
import pyarrow as pa
import pytest

from dedup_assets.core.util.errors import SettingsError
from dedup_assets.core.verify.jaccard import shingle_sets
from dedup_assets.core.settings.model import Settings
from dedup_assets.core.sketch.fingerprints import fingerprint_batch
from dedup_assets.core.pipeline.step_params import SketchParams
from dedup_assets.core.text.normalize import Shingling, document_shingles, normalize_text
from dedup_assets.core.text.tokenizers import TOKENIZERS, Tokenizer, TokenizerType, register
from dedup_assets.settings_resource import DedupSettings


def test_the_settings_take_the_registered_units_and_no_other():
    units = tuple(TOKENIZERS)
    assert units[0] == "word" and "char" in units
    assert get_args(get_type_hints(Settings)["shingle_unit"]) == units
    described = next(setting for setting in fields(Settings) if setting.name == "shingle_unit").metadata["doc"]
    assert all(f"{unit}: {TOKENIZERS[unit].description}" in described for unit in units)
    config_enum = DedupSettings.model_fields["shingle_unit"].annotation
    assert tuple(choice.value for choice in config_enum) == units
    with pytest.raises(SettingsError, match=f"shingle_unit must be one of {', '.join(units)}, got 'digits'"):
        Settings(shingle_unit="digits")


def _digit_tokens(normalized: str) -> list[str]:
    return [token for token in normalized.split() if token.isascii() and token.isdigit()]


@nb.njit
def _digit_bounds(lowered, words, length, starts, ends):
    """The tokens (runs of kept bytes) made of ASCII digits alone."""
    count, start, digits = 0, np.int64(-1), True
    for position in range(np.int64(length) + 1):
        byte = lowered[position] if position < np.int64(length) else np.uint8(0)
        if byte == 0:
            if start >= 0 and digits:
                starts[count], ends[count] = start, position
                count += 1
            start, digits = np.int64(-1), True
        else:
            start = position if start < 0 else start
            digits = digits and np.uint8(byte - np.uint8(48)) < np.uint8(10)
    return count


@pytest.fixture
def digits_unit():
    """A toy unit, registered here alone: whitespace-separated tokens of digits only."""
    tokenizer = register(
        Tokenizer("digits", "tokens of digits alone", _digit_tokens, " ", _digit_bounds, min_token_bytes=2)
    )
    yield tokenizer
    del TOKENIZERS[tokenizer.name]


BODIES = [
    "Room 101, floor 3: call 555 0199 (or 12ab, not a number) before 2026.",
    "Café ２０２６ au 12 rue 7, 75011 Paris — 中文 42 43 44",
    "1 2 3 4 5 6 7 8 9 10 11 12 " * 20,
    "only one 7",
    # capital sigma and a character beyond the plane: normalized by the reference for the kernels
    "Ünïcode 10 naïve 20 ΣΊΣΥΦΟΣ 30 𝟘 40",
]


def test_a_registered_tokenizer_runs_through_both_schemes_without_a_kernel_change(digits_unit):
    """The toy unit's shingles of a body are the word unit's of the body's digit tokens alone,
    as strings (the reference), as the kernels' hashes, and in every fingerprint column."""
    digits_only = [" ".join(_digit_tokens(normalize_text(body))) for body in BODIES]
    assert all(digits_only)
    ids = pa.array([str(row) for row in range(len(BODIES))])
    for size in (1, 2, 5):
        toy, word = Shingling(size, "digits"), Shingling(size)
        for body, digits in zip(BODIES, digits_only):
            assert document_shingles(body, toy) == document_shingles(digits, word)
        toy_values, toy_offsets = shingle_sets(pa.array(BODIES), toy)
        word_values, word_offsets = shingle_sets(pa.array(digits_only), word)
        assert toy_offsets.tolist() == word_offsets.tolist()
        assert toy_values.tolist() == word_values.tolist()
        for scheme in ("fss", "blake2b"):
            toy_params = SketchParams(scheme, size, 16, 4, 42, shingle_unit="digits")
            by_toy = fingerprint_batch(ids, pa.array(BODIES), toy_params)
            by_word = fingerprint_batch(ids, pa.array(digits_only), SketchParams(scheme, size, 16, 4, 42))
            for column in ("token_count", "shingle_count", "content_hash", "signature"):
                assert by_toy.column(column).to_pylist() == by_word.column(column).to_pylist(), (scheme, column)
            reference = [len(document_shingles(body, toy)) for body in BODIES]
            assert by_toy.column("shingle_count").to_pylist() == reference


def test_a_tokenizer_s_type_names_its_source_so_the_kernels_compile_again_when_it_changes(tmp_path):
    """numba's cache checks only kernels.py; the type in the kernels' signature carries a digest
    of the tokenizer's files, so an edited tokenizer is a new signature, never a stale kernel."""
    digests = []
    for body in ("return 0", "return 1"):
        module = tmp_path / f"toy_{len(digests)}.py"
        module.write_text(f"def bounds(lowered, words, length, starts, ends):\n    {body}\n")
        namespace = {}
        exec(compile(module.read_text(), str(module), "exec"), namespace)
        bounds = nb.njit(namespace["bounds"])
        digests.append(Tokenizer("toy", "toy", str.split, " ", bounds, min_token_bytes=2).digest)
    assert digests[0] != digests[1]
    assert TokenizerType("toy", digests[0]) != TokenizerType("toy", digests[1])

"""The tokenizers (shingle units), one list: each is a module here that registers a
:class:`Tokenizer`, and the settings' ``shingle_unit`` takes the names registered.

A tokenizer gives a normalized text's tokens twice, equal by construction:
- its **reference** (``tokenize``, ``separator``): the tokens as strings, and what joins them into
  a shingle; the ``blake2b`` scheme hashes those strings, and the kernels are tested against it.
- its **kernels** (``numba.njit`` functions): ``bounds(lowered, words, length, starts, ends)``
  writes the starts and ends of the tokens of a document's byte classes (``lowered``: bytes as
  ``kernels._byte_class`` keeps them, 0 for a separator; ``words``: the same as uint64) and
  returns their count; ``kernels.token_hashes`` hashes them, over the document's bytes as the
  reference normalizes them. That is the **kernel entry point** (``kernel``: a ``text.KernelText``,
  a document and the thread's ``kernels.Scratch`` to the count of token hashes written to
  ``scratch.tokens``) unless a tokenizer brings its own (``word`` does, for a faster path).

The kernels reach both as methods of the ``tokenizer`` field of the ``KernelText``, whose numba
type names the unit: each unit compiles kernels of its own, and no kernel branches on the unit.
The type also names a digest of the tokenizer's source files, because numba's cache checks only
the file that defines a cached kernel (``sketch/kernels.py``): changing a tokenizer changes the
kernels' signature, so they compile again rather than run the stale tokenizer.

Adding one: a module beside ``word.py`` that calls :func:`register`, imported at the bottom of
this file (a test may register its own with :func:`register` alone).
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from numba.core import types
from numba.extending import NativeValue, models, overload_method, register_model, typeof_impl, unbox

from ...sketch import kernels


@dataclass(frozen=True)
class Tokenizer:
    """One shingle unit."""

    name: str  # the shingle_unit setting's word, and what the sketch scheme records
    description: str  # what its shingles are, for the setting's description
    tokenize: Callable[[str], list[str]]  # the reference: a normalized text's tokens
    separator: str  # what joins a shingle's tokens in the reference (and a text's, for its hash)
    bounds: Callable  # the tokens' starts and ends in a document's byte classes
    # the fewest bytes of a document one token takes (its separator included): the kernels'
    # token buffers hold a document's bytes divided by this, plus one
    min_token_bytes: int
    kernel: Callable = kernels.token_hashes  # the entry point: (KernelText, doc, Scratch) -> count
    digest: str = field(init=False)

    def __post_init__(self) -> None:
        files = sorted({inspect.getsourcefile(function.py_func) for function in (self.bounds, self.kernel)})
        source = b"".join(Path(file).read_bytes() for file in files)
        object.__setattr__(self, "digest", hashlib.sha256(source).hexdigest()[:16])


# name -> tokenizer, in the order registered (the first is the default, ``word``)
TOKENIZERS: dict[str, Tokenizer] = {}


def register(tokenizer: Tokenizer) -> Tokenizer:
    """Add ``tokenizer``: its name becomes a value ``shingle_unit`` takes."""
    if tokenizer.name in TOKENIZERS:
        raise ValueError(f"a tokenizer named {tokenizer.name!r} is registered already")
    TOKENIZERS[tokenizer.name] = tokenizer
    return tokenizer


class TokenizerType(types.Dummy):
    """A tokenizer in compiled code: no data, only its type, by which numba picks the entry
    point when it compiles a kernel."""

    def __init__(self, name: str, digest: str):
        self.unit = name
        super().__init__(name=f"Tokenizer({name}, {digest})")


register_model(TokenizerType)(models.OpaqueModel)


@typeof_impl.register(Tokenizer)
def _typeof_tokenizer(value: Tokenizer, context) -> TokenizerType:
    return TokenizerType(value.name, value.digest)


@unbox(TokenizerType)
def _unbox_tokenizer(typ, obj, c):
    return NativeValue(c.context.get_dummy_value())


@overload_method(TokenizerType, "token_hashes")
def _token_hashes(tokenizer, text, doc, scratch):
    kernel = TOKENIZERS[tokenizer.unit].kernel

    def token_hashes(tokenizer, text, doc, scratch):
        return kernel(text, doc, scratch)

    return token_hashes


@overload_method(TokenizerType, "bounds", inline="always")
def _bounds(tokenizer, lowered, words, length, starts, ends):
    bounds = TOKENIZERS[tokenizer.unit].bounds

    def token_bounds(tokenizer, lowered, words, length, starts, ends):
        return bounds(lowered, words, length, starts, ends)

    return token_bounds


# the built-in units, the default first
from . import word, char  # noqa: E402, F401  (they register themselves)

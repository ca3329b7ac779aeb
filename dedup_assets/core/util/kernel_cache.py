"""Where numba caches the compiled kernels: beside the code (``__pycache__``), else numba's
user-wide cache (``~/.cache/numba``), as numba chooses; and where neither can be written (a
read-only checkout in a container whose home is read-only too), a folder of this user's in the
temporary directory, which numba would otherwise refuse with a traceback at import.

Every module with cached kernels calls :func:`writable_cache` before it defines them."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numba

# set when neither place numba looks could be written: the folder the kernels are cached in
# instead (the warm-up names it when it compiles)
fallback_folder: Path | None = None


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def writable_cache(module_file: str) -> None:
    """Make sure numba can cache the kernels of the module at ``module_file``."""
    global fallback_folder
    if numba.config.CACHE_DIR:  # NUMBA_CACHE_DIR, the user's own choice, or ours already
        return
    # numba's user-wide place on Linux and macOS-style XDG setups (numba.misc.appdirs)
    user_wide = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "numba"
    if _writable(Path(module_file).parent / "__pycache__") or _writable(user_wide):
        return
    fallback_folder = Path(tempfile.gettempdir()) / f"dedup-assets-numba-{os.getuid()}"
    numba.config.CACHE_DIR = str(fallback_folder)

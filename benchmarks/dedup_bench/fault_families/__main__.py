"""``python -m dedup_bench.fault_families``: the fault matrix (see the package's docstring)."""

import sys

from .matrix import main

sys.exit(main())

"""``python -m dedup_tests.faults``: the fault matrix (see the package's docstring)."""

import sys

from .matrix import main

sys.exit(main())

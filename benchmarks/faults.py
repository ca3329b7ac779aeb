"""The fault matrix (the package dedup_bench.fault_families): faults injected into real runs, a table of
what became of each, exit 1 when a record was lost or a release mixed. See that package's
docstring for the options; ``python -m dedup_bench.fault_families`` is the same."""

import sys

from dedup_bench.fault_families.matrix import main

if __name__ == "__main__":
    sys.exit(main())

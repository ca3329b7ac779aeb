"""The one entry point of the benchmark's child processes, each run apart so that its memory and
time are its own: ``python -m dedup_bench.child MODULE.FUNCTION ARGS_JSON`` calls
``dedup_bench.MODULE.FUNCTION(*ARGS)`` and prints what it returns as one JSON line."""

import importlib
import json
import sys

if __name__ == "__main__":
    module, function = sys.argv[1].rsplit(".", 1)
    result = getattr(importlib.import_module(f"dedup_bench.{module}"), function)(*json.loads(sys.argv[2]))
    print(json.dumps(result, default=str), flush=True)

"""Python sources parsed to syntax trees in a child process of their own.

CPython 3.11 keeps the depth of its syntax-tree construction in state that every thread of a
process shares (python/cpython#106905), so ``ast.parse`` in the test process fails at random
with "AST constructor recursion depth mismatch" once a thread that Ray or Dagster left behind
runs in the middle of it (CI failed so, in ``test_engines``, after the Ray tests). A child
process has no such thread; the trees come back pickled, which builds them without that
counter."""

import ast
import pickle
import subprocess
import sys

_PARSE = (
    "import ast, pickle, sys\n"
    "pickle.dump([ast.parse(source) for source in pickle.load(sys.stdin.buffer)], sys.stdout.buffer)\n"
)


def parsed(sources: list[str]) -> list[ast.Module]:
    """The syntax tree of each source, in order."""
    done = subprocess.run(
        [sys.executable, "-c", _PARSE], input=pickle.dumps(sources), capture_output=True, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")
    return pickle.loads(done.stdout)

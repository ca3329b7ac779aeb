"""Whether a process recorded earlier still runs, for the launch-time checks that find a run's
process (``run_health.py``) or a local cluster's (``local_cluster.py``) by its pid."""

from __future__ import annotations

import os
from pathlib import Path


def alive(pid: int, since: float) -> bool:
    """Whether ``pid`` is a process that started no later than ``since`` (a process id is
    reused once its process is gone)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    stat = Path(f"/proc/{pid}/stat")
    if not stat.exists():
        return True
    ticks = int(stat.read_text().rsplit(")", 1)[1].split()[19])
    boot = next(int(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines() if line.startswith("btime"))
    return boot + ticks / os.sysconf("SC_CLK_TCK") <= since + 1

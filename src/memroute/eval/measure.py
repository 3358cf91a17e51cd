"""What a benchmark reads of its own process."""

from __future__ import annotations

import resource
from pathlib import Path


def peak_rss_mb() -> float:
    """This program's peak resident memory in MB: ``VmHWM`` where Linux gives it. ``ru_maxrss`` is not used
    there because it keeps the peak of the image before ``exec``: in a child process, the resident memory
    of the parent at the fork (the filling process, with the corpus vectors), not the child's own."""
    try:
        for line in Path("/proc/self/status").read_text(encoding="ascii").splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

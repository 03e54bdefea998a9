"""The CLI's collector policy: imports uncollected then frozen once, the collector restored.

Run in a child process: freezing the test process would keep its garbage for good."""

from __future__ import annotations

import subprocess
import sys

CHILD = """
import gc
from analyzer.core.collector import long_lived
seen = []
with long_lived():
    seen.append(gc.isenabled())
    kept = [[] for _ in range(1000)]
seen.append(gc.isenabled())
frozen = gc.get_freeze_count()
with long_lived():
    more = [[] for _ in range(1000)]
gc.disable()
with long_lived():
    pass
print(seen[0], seen[1], frozen > 1000, gc.get_freeze_count() == frozen, gc.isenabled())
"""


def test_long_lived_freezes_once_and_restores_the_collector():
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, check=True)
    # off inside, on after; frozen after the first block only; a disabled one stays off
    assert out.stdout.split() == ["False", "True", "True", "True", "False"]

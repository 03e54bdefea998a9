"""The garbage collector's part in a CLI run: short, and building mostly what it keeps.

- While the pipeline's modules are imported, collections find nothing (what an import
  creates lives as long as the process) and cost half the import: `long_lived()` holds them
  off, then freezes what exists (once a process), so later collections skip it.
- When the command is done, the collection at exit would walk and free every object the run
  built, catalogs included, at the cost of a small log's whole analysis: `before_exit()`
  freezes them instead. The OS takes the memory back; files are closed by then, and stdout
  is flushed at exit as always.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def long_lived() -> Iterator[None]:
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if not gc.get_freeze_count():
            gc.freeze()
        if collecting:
            gc.enable()


def before_exit() -> None:
    gc.freeze()

"""Writing report files: atomically (temp file + rename), never over an input."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


class OutputError(Exception):
    """A report file that cannot or must not be written."""


def write_atomically(path: Path, text: str, inputs: list[str]) -> None:
    """Write `text` to `path` via a temp file in the same folder, then rename over it."""
    target = path.resolve()
    for name in inputs:
        if name != "-" and Path(name).exists() and Path(name).resolve() == target:
            raise OutputError(f"{path}: refusing to write the report over an input file")
    folder = target.parent
    if not folder.is_dir():
        raise OutputError(f"{path}: folder {folder} does not exist")
    fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", dir=folder)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(temp, target)
    except OSError as exc:
        Path(temp).unlink(missing_ok=True)
        raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from None

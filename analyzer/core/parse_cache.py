"""Parsed package data kept between runs: the rules and catalogs, not parsed on every run.

Reading the shipped TOML rules and JSON catalogs into objects was a third of a small log's
run. What they parse into is pickled under the user's cache dir ($LOGANALYZE_CACHE_DIR,
else $XDG_CACHE_HOME/loganalyze, else ~/.cache/loganalyze), one file per kind of data and
source folder. The file starts with its key: the path, size and mtime of every source file
(the data files and the code that builds from them, as Python's own bytecode cache does),
the cache format and the Python version. Any difference and the data is parsed again and
the file rewritten; a cache that cannot be read, written or trusted (not ours) is skipped,
and the data parsed as before. LOGANALYZE_CACHE_DIR="" turns the cache off.
"""

from __future__ import annotations

import gc
import os
import pickle
import sys
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

CACHE_FORMAT = 1
ENV_DIR = "LOGANALYZE_CACHE_DIR"
T = TypeVar("T")


def cache_dir() -> Path | None:
    """Where parsed data is kept (None: nowhere, the cache is off)."""
    chosen = os.environ.get(ENV_DIR)
    if chosen is not None:
        return Path(chosen) if chosen else None
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "loganalyze"


def cached(kind: str, sources: Sequence[Any], build: Callable[[], T]) -> T:
    """`build()`, or what it returned last time if no file of `sources` changed since.

    `sources` are the files the result is built from, data and code (paths, or
    importlib.resources entries: one that is no real file, in a zip, turns the cache off).
    """
    folder = cache_dir()
    key = _key(sources)
    if folder is None or key is None:
        return build()
    folders = sorted({str(Path(s).parent) for s in sources})
    where = zlib.crc32("\0".join(folders).encode("utf-8"))  # one file per source checkout
    path = folder / f"{kind}-{where:08x}.pickle"
    found = _load(path, key)
    if found is not _MISSING:
        return found
    value = build()
    _store(folder, path, key, value)
    return value


_MISSING: Any = object()


def _key(sources: Sequence[Any]) -> tuple[str, ...] | None:
    key = [f"format {CACHE_FORMAT}", sys.version]
    for source in sources:
        if not isinstance(source, Path):
            return None
        try:
            stat = source.stat()
        except OSError:
            return None
        key += [str(stat.st_size), str(stat.st_mtime_ns), str(source)]
    return tuple(key)


def _load(path: Path, key: tuple[str, ...]) -> Any:
    try:
        with open(path, "rb") as file:
            if hasattr(os, "getuid") and os.fstat(file.fileno()).st_uid != os.getuid():
                return _MISSING  # pickle runs code: only our own files are read
            if pickle.load(file) != key:
                return _MISSING
            # unpickling makes tens of thousands of containers and frees none: collections
            # it triggers find nothing, and doubled the load time
            collecting = gc.isenabled()
            gc.disable()
            try:
                return pickle.load(file)
            finally:
                if collecting:
                    gc.enable()
    except Exception:  # missing, cut short, written by another version: parse again
        return _MISSING


def _store(folder: Path, path: Path, key: tuple[str, ...], value: Any) -> None:
    partial = path.with_name(f"{path.name}.{os.getpid()}.partial")
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        with open(partial, "wb") as file:
            pickle.dump(key, file, protocol=pickle.HIGHEST_PROTOCOL)
            pickle.dump(value, file, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(partial, path)  # readers see the old file or the whole new one
    except Exception:  # unwritable, full, unpicklable: the run goes on uncached
        try:
            partial.unlink()
        except OSError:
            pass

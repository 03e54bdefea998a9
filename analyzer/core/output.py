"""Writing output files where the user said, changing nothing else.

A regular file (or a new path) is written to a temp file in its folder and renamed over it,
so a reader never sees half a report; the file keeps its mode (and, where allowed, its
owner), and a new one gets the mode a shell redirection would give (0666 less the umask).
Anything else that exists (a device such as /dev/null, a FIFO, a socket, /dev/stdout,
/proc/self/fd/N) is opened and written in place: renaming over it would replace the node.
A symlink is followed. Never over an input; every OSError is one OutputError.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

# Links into a process's open files: what they name is a descriptor, not a path to rename.
DESCRIPTOR_LINK = re.compile(r"^/(?:proc/(?:self|thread-self|\d+)/fd|dev/fd)/")
MAX_LINK_HOPS = 40


class OutputError(Exception):
    """An output file that cannot or must not be written."""


def write_output(path: Path, text: str, inputs: Sequence[str]) -> None:
    """Write `text` (UTF-8) to `path`: see the module doc."""
    with open_output(path, inputs) as handle:
        handle.write(text)


@contextmanager
def open_output(
    path: Path, inputs: Sequence[str], *, binary: bool = False, newline: str | None = None
) -> Iterator[IO[Any]]:
    """A handle on `path`'s new content, committed when the block ends without an error
    (then renamed into place, or closed for a device); on an error the temp file is gone."""
    try:
        target = _target(path, inputs)
        mode = "wb" if binary else "w"
        encoding = None if binary else "utf-8"
        if target is None:
            with open(path, mode, encoding=encoding, newline=newline) as handle:
                yield handle
            return
        import tempfile  # here: most runs print to stdout

        fd, temp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
        try:
            _keep_mode(fd, target)
            with os.fdopen(fd, mode, encoding=encoding, newline=newline) as handle:
                yield handle
            os.replace(temp, target)
        except BaseException:
            Path(temp).unlink(missing_ok=True)
            raise
    except OSError as exc:
        raise OutputError(f"{path}: cannot write ({exc.strerror or exc})") from None


def _target(path: Path, inputs: Sequence[str]) -> Path | None:
    """The regular file to replace atomically, or None to write `path` in place."""
    try:
        found = os.stat(path)
    except FileNotFoundError:
        found = None
    if found is not None and _is_input(found, inputs):
        raise OutputError(f"{path}: refusing to write over an input file")
    if found is not None and not replaced_atomically(path):
        return None
    target = path.resolve()
    if found is None and not target.parent.is_dir():
        raise OutputError(f"{path}: folder {target.parent} does not exist")
    return target


def replaced_atomically(path: Path) -> bool:
    """True when `path` is (or would be) a regular file written by rename, not in place."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode) and not _names_a_descriptor(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _is_input(found: os.stat_result, inputs: Sequence[str]) -> bool:
    for name in inputs:
        if name == "-":
            continue
        try:
            if os.path.samestat(found, os.stat(name)):
                return True
        except OSError:
            continue
    return False


def _names_a_descriptor(path: Path) -> bool:
    """True when `path` or a link it leads through is /proc/self/fd/N or /dev/fd/N
    (/dev/stdout is one): even a regular file behind it is written through the descriptor."""
    current = os.path.abspath(path)
    for _ in range(MAX_LINK_HOPS):
        if DESCRIPTOR_LINK.match(current):
            return True
        if not os.path.islink(current):
            return False
        current = os.path.normpath(os.path.join(os.path.dirname(current), os.readlink(current)))
    return False


def _keep_mode(fd: int, target: Path) -> None:
    """Give the temp file the mode (and owner) of the file it replaces, else the umask's."""
    try:
        old = os.stat(target)
    except FileNotFoundError:
        os.fchmod(fd, 0o666 & ~_umask())
        return
    os.fchmod(fd, stat.S_IMODE(old.st_mode))
    if (old.st_uid, old.st_gid) != (os.geteuid(), os.getegid()):
        try:
            os.fchown(fd, old.st_uid, old.st_gid)
        except PermissionError:
            pass  # only root may give a file away: the report is still written, as ours


def _umask() -> int:
    mask = os.umask(0o022)
    os.umask(mask)
    return mask

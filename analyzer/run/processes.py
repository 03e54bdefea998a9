"""The server's process tree, read from /proc: alive or not, its members, stopping it.

The child gets its own session (so a Ctrl-C reaches only us, and we stop its whole tree);
its tree is its process group, its descendants, and the orphans reparented to us as
subreaper. A pid is compared with its start time, so a recycled pid is never taken for
the server.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass
from pathlib import Path

PR_SET_CHILD_SUBREAPER = 36


@dataclass(frozen=True)
class Proc:
    pid: int
    ppid: int
    pgrp: int
    state: str
    start_ticks: int


def _read_proc(pid: int) -> Proc | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text("utf-8", errors="replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    try:
        return Proc(pid, int(fields[1]), int(fields[2]), fields[0], int(fields[19]))
    except (IndexError, ValueError):
        return None


def _processes() -> list[Proc]:
    try:
        names = os.listdir("/proc")
    except OSError:
        return []
    found = (_read_proc(int(n)) for n in names if n.isdigit())
    return [p for p in found if p is not None]


def process_alive(pid: int | None, start_ticks: int | None = None) -> bool:
    """Alive and the same process (a recycled pid has another start time); zombies are dead."""
    if not pid:
        return False
    proc = _read_proc(pid)
    if proc is not None:
        return proc.state not in ("Z", "X") and (
            start_ticks is None or proc.start_ticks == start_ticks
        )
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def start_ticks(pid: int) -> int | None:
    proc = _read_proc(pid)
    return proc.start_ticks if proc else None


def server_tree(root: int, since: int | None = None) -> set[int]:
    """The server's processes: its group, its descendants, and orphans reparented to us.

    An orphan is one of ours started no earlier than the server (`since`, its start time in
    clock ticks), so a program that embeds the supervisor keeps its other children.
    """
    procs = [p for p in _processes() if p.state not in ("Z", "X")]
    members = {p.pid for p in procs if p.pgrp == root}
    if since is not None:
        members |= {p.pid for p in procs if p.ppid == os.getpid() and p.start_ticks >= since}
    if process_alive(root):
        members.add(root)
    grew = True
    while grew:
        children = {p.pid for p in procs if p.ppid in members} - members
        members |= children
        grew = bool(children)
    members.discard(os.getpid())
    return members


def signal_tree(root: int, signum: int, since: int | None = None) -> set[int]:
    """Send `signum` to the server's group and every other process of its tree."""
    targets = server_tree(root, since)
    try:
        os.killpg(root, signum)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in targets:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass
    return targets


def become_subreaper() -> None:
    """Orphaned grandchildren (a scheduler whose parent died) are reparented to us, not to
    init, so the tree can still be found and stopped. Linux only; elsewhere a no-op."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def reap_orphans(root: int, since: int | None) -> None:
    """Collect exited orphans reparented to us (never the server: its Popen reaps it)."""
    if since is None:
        return
    for proc in _processes():
        ours = proc.ppid == os.getpid() and proc.pid != root and proc.start_ticks >= since
        if ours and proc.state == "Z":
            try:
                os.waitpid(proc.pid, os.WNOHANG)
            except ChildProcessError:
                pass

"""`loganalyze status`: a run's state from its state file, its log and /proc.

Works with no supervisor alive: whether the server still runs, whether it got ready,
its last lines (secrets masked) and, for a death nobody explained, the verdict.
"""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from analyzer.core.model import Report
from analyzer.engine.redact import redact_text
from analyzer.engine.scan import READY_MARKER
from analyzer.run.processes import process_alive
from analyzer.run.state import STATE_SUFFIX, RunError, RunState, state_path_for

TAIL_BYTES = 64 * 1024


@dataclass
class StatusView:
    """What `loganalyze status` shows: read from the state file, the log and /proc."""

    state_path: str
    state: RunState
    alive: bool
    supervisor_alive: bool
    ready: bool
    ready_after_s: float | None
    last_lines: list[str] = field(default_factory=list)
    report: Report | None = None


def find_state(target: str | None) -> Path:
    """A state file, a log (its state file beside it), or the newest state file here."""
    if target is None:
        found = sorted(Path(".").glob(f"*{STATE_SUFFIX}"), key=lambda p: p.stat().st_mtime)
        if not found:
            raise RunError(f"no *{STATE_SUFFIX} state file here; name a log or a state file")
        return found[-1]
    path = Path(target)
    if path.name.endswith(STATE_SUFFIX):
        candidate = path
    else:
        candidate = state_path_for(path)
    if not candidate.is_file():
        raise RunError(f"{target}: no loganalyze run state ({candidate} does not exist)")
    return candidate


def read_status(target: str | None, sglang_version: str | None = None) -> StatusView:
    path = find_state(target)
    state = RunState.load(path)
    alive = state.exit is None and process_alive(state.pid, state.pid_start_ticks)
    supervisor = state.exit is None and process_alive(state.supervisor_pid)
    log = Path(state.log)
    ready = state.ready is not None or (not supervisor and _log_has_ready_line(log))
    view = StatusView(str(path), state, alive, supervisor, ready, state.ready_after_s)
    view.last_lines = _tail(log, 10)
    if not alive and not (state.pid is None and supervisor) and _failed(state) and log.is_file():
        from analyzer.pipeline import Options, analyze

        view.report = analyze(
            [str(log)], Options(command=state.command, sglang_version=sglang_version)
        )
    return view


def _failed(state: RunState) -> bool:
    """A death worth a verdict: not an exit 0, not a stop the user asked for."""
    if state.exit is None:
        return True
    reason = state.exit.get("reason")
    return reason in ("signal", "ready_timeout") or (
        reason == "exited" and state.exit.get("code") != 0
    )


def _log_has_ready_line(log: Path) -> bool:
    marker = READY_MARKER.encode()
    try:
        with log.open("rb") as handle:
            return any(marker in line for line in handle)
    except OSError:
        return False


def _tail(log: Path, count: int) -> list[str]:
    """The last lines of the log, bounded in bytes read, secrets masked."""
    from analyzer.formats.terminal import clean

    try:
        with log.open("rb") as handle:
            handle.seek(0, os.SEEK_END)
            size = handle.tell()
            handle.seek(max(size - TAIL_BYTES, 0))
            data = handle.read()
    except OSError:
        return []
    lines = data.decode("utf-8", errors="replace").splitlines()
    return [clean(redact_text(line)) for line in lines[-count:]]


def status_json(view: StatusView) -> dict[str, Any]:
    """The `loganalyze status --json` object (fields are only ever added)."""
    report = view.report
    return {
        "state_file": view.state_path,
        "log": view.state.log,
        "command": view.state.command,
        "pid": view.state.pid,
        "alive": view.alive,
        "supervisor_pid": view.state.supervisor_pid,
        "supervisor_alive": view.supervisor_alive,
        "started": view.state.started,
        "ready": view.ready,
        "ready_after_s": view.ready_after_s,
        "ready_by": view.state.ready_by,
        "exit": view.state.exit,
        "verdict": report.verdict if report else view.state.verdict,
        "incidents": [
            {"class": i.rule_class, "title": i.title, "corrected_command": i.corrected_command}
            for i in (report.incidents if report else [])
        ],
        "last_lines": view.last_lines,
        "error": view.state.error,
    }


def render_status(view: StatusView) -> str:
    state = view.state
    if view.alive:
        phase = (
            f"ready after {view.ready_after_s:.1f} s"
            if view.ready_after_s is not None
            else ("ready" if view.ready else "starting (not ready yet)")
        )
        headline = f"running (pid {state.pid}), {phase}"
    elif state.exit is not None:
        headline = exit_text(state.exit)
    elif state.pid is None and view.supervisor_alive:
        headline = "starting (the supervisor has not started the server yet)"
    else:
        headline = "dead: ended while no supervisor watched it (exit code unknown)"
    out = [f"loganalyze status: {state.log}", f"  server:     {headline}"]
    if state.exit is None:
        watcher = "running" if view.supervisor_alive else "gone"
        out.append(f"  supervisor: pid {state.supervisor_pid}, {watcher}")
    out.append(f"  started:    {state.started}")
    out.append(f"  command:    {state.command}")
    if state.error:
        out.append(f"  error:      {state.error}")
    if view.report is not None:
        out.append(f"  verdict:    {view.report.verdict}")
        for index, incident in enumerate(view.report.incidents, start=1):
            out.append(
                f"    [{index}] {incident.severity.upper()} {incident.rule_class}: {incident.title}"
            )
        corrected = view.report.incidents[0].corrected_command if view.report.incidents else None
        if corrected:  # the root cause's: incidents come root cause first
            out.append("  corrected command:")
            out.append(f"    {corrected}")
        out.append(f"  full report: loganalyze {shlex.quote(state.log)}")
    if view.last_lines:
        out.append("  last lines:")
        out.extend(f"    | {line}" for line in view.last_lines)
    return "\n".join(out) + "\n"


def exit_text(exit_info: dict[str, Any]) -> str:
    reason = exit_info.get("reason")
    after = exit_info.get("after_s")
    when = f" after {after:.1f} s" if isinstance(after, (int, float)) else ""
    if reason == "signal":
        return f"dead: killed by {exit_info.get('signal')}{when}"
    if reason == "ready_timeout":
        return f"dead: not ready in time, stopped{when}"
    if reason == "stopped":
        return f"stopped on request{when}"
    if reason == "not_started":
        return "never started (the command could not be run)"
    return f"dead: exited with code {exit_info.get('code')}{when}"

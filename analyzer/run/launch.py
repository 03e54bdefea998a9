"""`loganalyze run`: check the command, claim the log, then supervise here or detached.

In the foreground the supervisor tees the log to stdout and explains a death; with
`--detach` a background supervisor (`analyzer.run.detached`) does the same and records
the verdict in the state file for `loganalyze status`.
"""

from __future__ import annotations

import os
import shlex
import signal
import sys
from pathlib import Path

from analyzer.run.detached import start_detached
from analyzer.run.explain import explain, print_report
from analyzer.run.processes import process_alive
from analyzer.run.state import RunError, RunRequest, RunState, state_path_for
from analyzer.run.status import exit_text
from analyzer.run.supervisor import Supervisor

EXIT_PREFLIGHT = 2  # the command is bad usage, as argparse (and SGLang) say it


# ---- claiming the log --------------------------------------------------------------------


def check_log(log: Path, force: bool) -> None:
    """Refuse a log path another run owns (always) or wrote (without --force)."""
    state_path = state_path_for(log)
    previous = _previous_state(state_path)
    if previous and previous.exit is None and process_alive(previous.pid, previous.pid_start_ticks):
        raise RunError(
            f"{log}: the run started {previous.started} (pid {previous.pid}) still writes it; "
            "stop that server first, or choose another --log"
        )
    if not force and (log.exists() or state_path.exists()):
        raise RunError(f"{log} exists from an earlier run; use --force to replace it, or --log")


def claim_log(log: Path, force: bool) -> None:
    """Create the log (exclusively without --force, so two runs cannot both take it)."""
    check_log(log, force)
    if not log.parent.is_dir():
        raise RunError(f"the log folder {log.parent} does not exist")
    flags = os.O_WRONLY | os.O_CREAT | (os.O_TRUNC if force else os.O_EXCL)
    try:
        os.close(os.open(log, flags, 0o644))
    except FileExistsError:
        raise RunError(f"{log} exists; use --force to replace it, or --log") from None
    except OSError as exc:
        raise RunError(f"{log}: cannot create ({exc.strerror or exc})") from None
    if force:
        state_path_for(log).unlink(missing_ok=True)


def _previous_state(path: Path) -> RunState | None:
    if not path.exists():
        return None
    try:
        return RunState.load(path)
    except RunError:
        return None


# ---- launching ---------------------------------------------------------------------------


def launch(request: RunRequest, force: bool, preflight: bool, colour: bool) -> int:
    """`loganalyze run`: check, claim the log, then supervise here or in the background."""
    if not request.argv:
        raise RunError("no command to run: loganalyze run [OPTIONS] -- COMMAND...")
    if request.health_url and not request.health_url.startswith(("http://", "https://")):
        raise RunError(f"--health-url {request.health_url}: expected an http:// or https:// URL")
    check_log(request.log, force)
    if preflight and not _preflight_passes(request):
        return EXIT_PREFLIGHT
    claim_log(request.log, force)
    if not request.detached:
        return run_foreground(request, colour)
    state = start_detached(request)
    if state.exit is not None:
        say_to_stderr(f"the server ended at once: {exit_text(state.exit)} (log: {request.log})")
        return int(state.exit.get("exit_code") or 1)
    sys.stdout.write(
        f"loganalyze: started in the background: pid {state.pid}, "
        f"supervisor pid {state.supervisor_pid}\n"
        f"  log:    {request.log}\n  state:  {request.state_path}\n"
        f"  status: loganalyze status {shlex.quote(str(request.log))}\n"
    )
    return 0


def _preflight_passes(request: RunRequest) -> bool:
    """Run the pre-flight; print its findings (the refusal on stdout: it is the report)."""
    from analyzer.run.preflight import render_preflight, run_preflight
    from analyzer.sglang.catalog import load_catalog

    result = run_preflight(request.argv, request.log, load_catalog(request.sglang_version))
    if result.refused:
        sys.stdout.write(render_preflight(result))
        sys.stdout.flush()
        say_to_stderr(
            "pre-flight refused the command; nothing was started (--no-preflight skips it)"
        )
        return False
    if result.problems:
        sys.stderr.write(render_preflight(result))
    return True


# ---- in the foreground -------------------------------------------------------------------


def say_to_stderr(message: str) -> None:
    sys.stderr.write(f"loganalyze: {message}\n")
    sys.stderr.flush()


def run_foreground(request: RunRequest, colour: bool) -> int:
    """Supervise in this process: tee to stdout, explain a death, return the exit code."""
    supervisor = Supervisor(request, sys.stdout.buffer, say_to_stderr)
    previous = {
        s: signal.signal(s, supervisor.request_stop)
        for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    }
    try:
        outcome = supervisor.run()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    if not outcome.explain:
        return outcome.exit_code
    say_to_stderr(f"analyzing {request.log}")
    try:
        report = explain(request, outcome)
        supervisor.record_verdict(report.verdict)
        print_report(report, colour)
    except KeyboardInterrupt:
        say_to_stderr(
            f"analysis interrupted; `loganalyze {shlex.quote(str(request.log))}` redoes it"
        )
    return outcome.exit_code

"""Detached runs: a background supervisor in its own session, and its entry point.

`start_detached` launches `python -m analyzer.run.detached` (this module's main), which
supervises the server with no terminal, records the verdict of a death in the state
file, and outlives the `loganalyze run` that started it.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
import time
from pathlib import Path

from analyzer.run.explain import explain
from analyzer.run.state import RunError, RunRequest, RunState
from analyzer.run.supervisor import POLL_SECONDS, Supervisor

DETACH_WAIT = 15.0


def start_detached(request: RunRequest) -> RunState:
    """Start a background supervisor (its own session) and wait until the server is started."""
    args = [sys.executable, "-m", "analyzer.run.detached", "--log", str(request.log)]
    args += ["--stop-timeout", str(request.stop_timeout)]
    if request.health_url:
        args += ["--health-url", request.health_url]
    if request.ready_timeout is not None:
        args += ["--ready-timeout", str(request.ready_timeout)]
    if request.sglang_version:
        args += ["--sglang-version", request.sglang_version]
    background = subprocess.Popen(
        [*args, "--", *request.argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
        close_fds=True,
    )
    deadline = time.monotonic() + DETACH_WAIT
    while time.monotonic() < deadline:
        state = _started_state(request.state_path)
        if state is not None:
            return state
        if background.poll() is not None:
            state = _started_state(request.state_path)
            if state is not None:
                return state
            raise RunError(f"the background supervisor exited with code {background.returncode}")
        time.sleep(POLL_SECONDS)
    raise RunError(f"the background supervisor did not start the server within {DETACH_WAIT:g} s")


def _started_state(path: Path) -> RunState | None:
    if not path.exists():
        return None
    try:
        state = RunState.load(path)
    except RunError:
        return None  # being replaced right now
    return state if state.pid or state.exit or state.error else None


def background_main(argv: list[str] | None = None) -> int:
    """The detached supervisor: `python -m analyzer.run.detached --log L [...] -- COMMAND`."""
    parser = argparse.ArgumentParser(prog="analyzer.run.detached")
    parser.add_argument("--log", required=True, type=Path)
    parser.add_argument("--health-url")
    parser.add_argument("--ready-timeout", type=float)
    parser.add_argument("--stop-timeout", type=float, default=10.0)
    parser.add_argument("--sglang-version")
    parser.add_argument("command", nargs=argparse.REMAINDER)
    options = parser.parse_args(argv)
    command = options.command[1:] if options.command[:1] == ["--"] else options.command
    request = RunRequest(
        command, options.log, options.health_url, options.ready_timeout,
        options.stop_timeout, options.sglang_version, detached=True,
    )  # fmt: skip
    supervisor = Supervisor(request, None, lambda message: None)
    signal.signal(signal.SIGTERM, supervisor.request_stop)
    signal.signal(signal.SIGINT, supervisor.request_stop)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        outcome = supervisor.run()
        if outcome.explain:
            supervisor.record_verdict(explain(request, outcome).verdict)
    except Exception as exc:  # noqa: BLE001 - recorded for `loganalyze status`, not lost
        if supervisor.state is not None:
            supervisor.state.error = repr(exc)
            supervisor.state.save(request.state_path)
        return 3
    return outcome.exit_code


if __name__ == "__main__":
    sys.exit(background_main())

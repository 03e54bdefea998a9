"""One supervised launch: start the child into the log, watch it, stop its whole tree.

The child gets its own session and writes straight into the log file, after a header
of what ran (secrets masked); the supervisor follows that file (`analyzer.run.readiness`).
Death is a non-zero exit, a signal, or no readiness within `--ready-timeout`; the run
ends as an `Outcome` (with the exit code `loganalyze run` returns), recorded in the log
and in the state file, and leftover processes of the server are stopped.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import IO, Any

from analyzer.engine.redact import redact_text
from analyzer.run.processes import (
    become_subreaper,
    reap_orphans,
    server_tree,
    signal_tree,
    start_ticks,
)
from analyzer.run.readiness import HealthProbe, LogFollower
from analyzer.run.state import RunRequest, RunState

EXIT_READY_TIMEOUT = 124  # as GNU timeout(1)
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127
HEADER_PREFIX = "# loganalyze run: "
POLL_SECONDS = 0.05
LEFTOVER_GRACE = 5.0
SECRET_NAMES = ("KEY", "TOKEN", "SECRET", "PASSW", "CREDENTIAL", "AUTH")


@dataclass
class Outcome:
    """How a supervised run ended, and the exit code `loganalyze run` returns for it."""

    reason: str  # exited | signal | ready_timeout | stopped | not_started
    exit_code: int
    child_code: int | None
    signal_name: str | None
    after_s: float
    ready: bool
    message: str

    @property
    def explain(self) -> bool:
        """Analyze the log: a death the user did not ask for."""
        if self.reason in ("signal", "ready_timeout"):
            return True
        return self.reason == "exited" and self.exit_code != 0


# ---- the log header ----------------------------------------------------------------------


def child_environment() -> dict[str, str]:
    """Ours, with Python unbuffered: the child writes to a file, which Python block-buffers."""
    env = dict(os.environ)
    env.setdefault("PYTHONUNBUFFERED", "1")
    return env


def header_lines(argv: list[str], env: dict[str, str], cwd: str, started: str) -> list[str]:
    """What ran, where and with which environment, secrets masked; the command line last,
    as a `$ ` prompt so that `loganalyze LOG` finds the command in the log by itself."""
    lines = [f"{HEADER_PREFIX}started {started} by pid {os.getpid()} in {cwd}"]
    for name in sorted(env):
        lines.append(f"{HEADER_PREFIX}env {_env_entry(name, env[name])}")
    lines.append(f"$ {redact_text(shlex.join(argv))}")
    return [line.replace("\n", "\\n").replace("\r", "\\r") for line in lines]


def _env_entry(name: str, value: str) -> str:
    if any(word in name.upper() for word in SECRET_NAMES):
        return f"{name}=***"
    return redact_text(f"{name}={value}")


# ---- supervising -------------------------------------------------------------------------


def now_stamp() -> str:
    return datetime.now().astimezone().isoformat(timespec="seconds")


class Supervisor:
    """One supervised launch: start, follow, detect readiness and death, stop the tree."""

    def __init__(
        self,
        request: RunRequest,
        echo: IO[bytes] | None,
        say: Callable[[str], None],
    ) -> None:
        self.request = request
        self.echo = echo
        self.say = say
        self.stop_signal: int | None = None
        self.state: RunState | None = None

    @property
    def since(self) -> int | None:
        return self.state.pid_start_ticks if self.state else None

    def request_stop(self, signum: int, _frame: Any = None) -> None:
        if self.stop_signal is not None and self.state and self.state.pid:
            signal_tree(self.state.pid, signal.SIGKILL, self.since)  # asked twice: no more grace
        self.stop_signal = signum

    def run(self) -> Outcome:
        request = self.request
        env = child_environment()
        cwd = os.getcwd()
        started = now_stamp()
        self.state = RunState(
            log=str(request.log.resolve()),
            command=redact_text(shlex.join(request.argv)),
            cwd=cwd,
            started=started,
            supervisor_pid=os.getpid(),
            detached=request.detached,
            health_url=request.health_url,
            ready_timeout=request.ready_timeout,
        )
        become_subreaper()
        with request.log.open("ab") as log:
            header = header_lines(request.argv, env, cwd, started)
            log.write(("\n".join(header) + "\n").encode("utf-8", errors="replace"))
            log.flush()
            offset = log.tell()
            began = time.monotonic()
            try:
                child = subprocess.Popen(
                    request.argv,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    env=env,
                    start_new_session=True,
                    close_fds=True,
                )
            except OSError as exc:
                return self._not_started(log, exc)
        self.state.pid = child.pid
        self.state.pid_start_ticks = start_ticks(child.pid)
        self._save()
        outcome = self._watch(child, began, offset, len(header) + 1)
        self._finish(outcome)
        return outcome

    def _not_started(self, log: IO[bytes], exc: OSError) -> Outcome:
        code = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_CANNOT_EXECUTE
        message = f"cannot start {self.request.argv[0]}: {exc.strerror or exc}"
        log.write(f"{HEADER_PREFIX}{message}\n".encode())
        outcome = Outcome("not_started", code, None, None, 0.0, False, message)
        self._finish(outcome)
        return outcome

    def _watch(self, child: subprocess.Popen, began: float, offset: int, first: int) -> Outcome:
        request = self.request
        follower = LogFollower(request.log, offset, first, self.echo)
        probe = HealthProbe(request.health_url) if request.health_url else None
        if probe:
            probe.start()
        reason = None
        try:
            while True:
                got = follower.pump()
                self._check_ready(follower, probe, began)
                if child.poll() is not None:
                    break
                if self.stop_signal is not None:
                    reason = "stopped"
                    self._stop(child, follower)
                    break
                waited = time.monotonic() - began
                if self.state.ready is None and request.ready_timeout is not None:
                    if waited > request.ready_timeout:
                        reason = "ready_timeout"
                        self._stop(child, follower)
                        break
                if not got:
                    time.sleep(POLL_SECONDS)
            follower.pump()
            self._check_ready(follower, probe, began)
        finally:
            if probe:
                probe.done.set()
            follower.close()
        leftovers = self._stop_leftovers(child.pid)
        code = child.returncode if child.returncode is not None else -signal.SIGKILL
        return self._outcome(code, reason, time.monotonic() - began, leftovers)

    def _check_ready(self, follower: LogFollower, probe: HealthProbe | None, began: float) -> None:
        if self.state.ready is not None:
            return
        by = "log" if follower.ready_line is not None else None
        if by is None and probe is not None and probe.ok.is_set():
            by = "health"
        if by is None:
            return
        after = round(time.monotonic() - began, 1)
        self.state.ready, self.state.ready_after_s, self.state.ready_by = now_stamp(), after, by
        self._save()
        where = (
            f"the ready line at {self.request.log}:{follower.ready_line}"
            if by == "log"
            else f"{self.request.health_url} answered"
        )
        self.say(f"ready in {after:.1f} s ({where})")

    def _stop(self, child: subprocess.Popen, follower: LogFollower) -> None:
        """SIGTERM to the whole tree, SIGKILL after the grace period; keep teeing meanwhile."""
        signal_tree(child.pid, signal.SIGTERM, self.since)
        deadline = time.monotonic() + self.request.stop_timeout
        while child.poll() is None and time.monotonic() < deadline:
            if not follower.pump():
                time.sleep(POLL_SECONDS)
        if child.poll() is None:
            signal_tree(child.pid, signal.SIGKILL, self.since)
            try:
                child.wait(timeout=LEFTOVER_GRACE)
            except subprocess.TimeoutExpired:
                pass  # unkillable for now (uninterruptible I/O): reported as SIGKILLed

    def _stop_leftovers(self, root: int) -> list[int]:
        """Processes of the server that outlived it (schedulers holding GPU memory)."""
        left = sorted(server_tree(root, self.since))
        if not left:
            reap_orphans(root, self.since)
            return []
        signal_tree(root, signal.SIGTERM, self.since)
        deadline = time.monotonic() + LEFTOVER_GRACE
        while server_tree(root, self.since) and time.monotonic() < deadline:
            reap_orphans(root, self.since)
            time.sleep(POLL_SECONDS)
        if server_tree(root, self.since):
            signal_tree(root, signal.SIGKILL, self.since)
            time.sleep(POLL_SECONDS)
        reap_orphans(root, self.since)
        return left

    def _outcome(
        self, returncode: int, reason: str | None, after: float, leftovers: list[int]
    ) -> Outcome:
        ready = self.state.ready is not None
        signal_name = _signal_name(-returncode) if returncode < 0 else None
        if reason == "ready_timeout":
            message = f"not ready after {self.request.ready_timeout:g} s: stopped the server"
            code = EXIT_READY_TIMEOUT
        elif reason == "stopped":
            message = f"stopped by {_signal_name(self.stop_signal)}"
            code = 128 + self.stop_signal
        elif returncode < 0:
            reason = "signal"
            message = f"the server was killed by {signal_name} (signal {-returncode}, exit code {returncode})"
            code = 128 - returncode
        else:
            reason = "exited"
            message = f"the server exited with code {returncode}"
            code = returncode
        message += f" after {after:.1f} s" + ("" if ready else ", never ready")
        if leftovers:
            message += (
                f"; stopped {len(leftovers)} leftover process(es): {' '.join(map(str, leftovers))}"
            )
        child_code = returncode if returncode >= 0 else None
        return Outcome(reason, code, child_code, signal_name, round(after, 1), ready, message)

    def _finish(self, outcome: Outcome) -> None:
        with self.request.log.open("ab") as log:
            log.write(f"{HEADER_PREFIX}{outcome.message}\n".encode())
        self.state.exit = {
            "reason": outcome.reason,
            "code": outcome.child_code,
            "signal": outcome.signal_name,
            "exit_code": outcome.exit_code,
            "after_s": outcome.after_s,
            "at": now_stamp(),
        }
        self._save()
        self.say(outcome.message)

    def record_verdict(self, verdict: str) -> None:
        self.state.verdict = verdict
        self._save()

    def _save(self) -> None:
        self.state.save(self.request.state_path)


def _signal_name(number: int | None) -> str:
    try:
        return signal.Signals(number).name
    except (ValueError, TypeError):
        return f"signal {number}"

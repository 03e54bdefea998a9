"""`loganalyze run`: launch the server under watch, and explain its death at once.

The child gets its own session (so a Ctrl-C reaches only us, and we stop its whole tree) and
writes straight into the log file; the supervisor follows that file to tee it to the terminal
and to see the ready line. Nothing the child writes passes through us, so when the
supervisor is killed the server and its log go on, and the JSON state file next to the log
still tells `loganalyze status` where to look.

Readiness is SGLang's "fired up and ready to roll" line or a 2xx from `--health-url`,
whichever comes first. Death is a non-zero exit, a signal, or no readiness within
`--ready-timeout`; then the log goes through the normal pipeline and the report is printed.
"""

from __future__ import annotations

import argparse
import ctypes
import http.client
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from analyzer.core.model import Report
from analyzer.engine.redact import redact_text
from analyzer.engine.scan import READY_MARKER

STATE_SUFFIX = ".run.json"
STATE_SCHEMA = 1
EXIT_PREFLIGHT = 2  # the command is bad usage, as argparse (and SGLang) say it
EXIT_READY_TIMEOUT = 124  # as GNU timeout(1)
EXIT_CANNOT_EXECUTE = 126
EXIT_NOT_FOUND = 127
HEADER_PREFIX = "# loganalyze run: "
POLL_SECONDS = 0.05
HEALTH_INTERVAL = 0.5
LEFTOVER_GRACE = 5.0
DETACH_WAIT = 15.0
TAIL_BYTES = 64 * 1024
MAX_CARRY = 64 * 1024
SECRET_NAMES = ("KEY", "TOKEN", "SECRET", "PASSW", "CREDENTIAL", "AUTH")
PR_SET_CHILD_SUBREAPER = 36


class RunError(Exception):
    """A run that must not start: the log is taken, the folder is missing."""


@dataclass
class RunRequest:
    """What `loganalyze run` was asked to do."""

    argv: list[str]
    log: Path
    health_url: str | None = None
    ready_timeout: float | None = None
    stop_timeout: float = 10.0
    sglang_version: str | None = None
    detached: bool = False

    @property
    def state_path(self) -> Path:
        return state_path_for(self.log)


@dataclass
class RunState:
    """The JSON state file: enough for `loganalyze status` with no supervisor alive."""

    log: str
    command: str
    cwd: str
    started: str
    supervisor_pid: int
    detached: bool
    health_url: str | None = None
    ready_timeout: float | None = None
    pid: int | None = None
    pid_start_ticks: int | None = None
    ready: str | None = None
    ready_after_s: float | None = None
    ready_by: str | None = None
    exit: dict[str, Any] | None = None
    verdict: str | None = None
    error: str | None = None
    schema_version: int = STATE_SCHEMA

    def save(self, path: Path) -> None:
        """Write atomically: a reader never sees half a file, a killed writer leaves the old."""
        temp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        temp.write_text(json.dumps(asdict(self), indent=2, sort_keys=True) + "\n", "utf-8")
        os.replace(temp, path)

    @classmethod
    def load(cls, path: Path) -> RunState:
        try:
            data = json.loads(path.read_text("utf-8"))
            known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
            return cls(**known)
        except (OSError, ValueError, TypeError) as exc:
            raise RunError(f"{path}: not a readable loganalyze run state ({exc})") from None


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


def state_path_for(log: Path) -> Path:
    return log.with_name(log.name + STATE_SUFFIX)


def default_log_path(now: datetime | None = None) -> Path:
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    return Path(f"sglang-{stamp}.log")


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


# ---- processes ---------------------------------------------------------------------------


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


def _become_subreaper() -> None:
    """Orphaned grandchildren (a scheduler whose parent died) are reparented to us, not to
    init, so the tree can still be found and stopped. Linux only; elsewhere a no-op."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _reap_orphans(root: int, since: int | None) -> None:
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


# ---- following the log -------------------------------------------------------------------


class LogFollower:
    """Reads what the child appended to the log: echoes it, counts lines, spots the ready line."""

    def __init__(self, path: Path, offset: int, first_line: int, echo: IO[bytes] | None) -> None:
        self.handle = path.open("rb")
        self.handle.seek(offset)
        self.echo = echo
        self.line_number = first_line - 1
        self.carry = b""
        self.ready_line: int | None = None
        self.marker = READY_MARKER.encode()

    def pump(self) -> bool:
        """Read everything new; True when there was something."""
        got = False
        while chunk := self.handle.read(65536):
            got = True
            self._echo(chunk)
            self._scan(chunk)
        return got

    def _echo(self, chunk: bytes) -> None:
        if self.echo is None:
            return
        try:
            self.echo.write(chunk)
            self.echo.flush()
        except (BrokenPipeError, ValueError, OSError):
            self.echo = None  # the reader went away: keep supervising, stop teeing

    def _scan(self, chunk: bytes) -> None:
        data = self.carry + chunk
        *complete, self.carry = data.split(b"\n")
        for line in complete:
            self.line_number += 1
            if self.ready_line is None and self.marker in line:
                self.ready_line = self.line_number
        if len(self.carry) > MAX_CARRY:
            self.carry = self.carry[-len(self.marker) :]

    def close(self) -> None:
        self.handle.close()


class HealthProbe(threading.Thread):
    """Polls the health URL until it answers 2xx; never through a proxy (it is our server)."""

    def __init__(self, url: str) -> None:
        super().__init__(daemon=True)
        self.url = url
        self.ok = threading.Event()
        self.done = threading.Event()
        self.opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))

    def run(self) -> None:
        while not self.done.is_set():
            try:
                with self.opener.open(self.url, timeout=2) as response:
                    if 200 <= response.status < 300:
                        self.ok.set()
                        return
            except (OSError, ValueError, http.client.HTTPException):
                pass
            self.done.wait(HEALTH_INTERVAL)


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
        _become_subreaper()
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
            _reap_orphans(root, self.since)
            return []
        signal_tree(root, signal.SIGTERM, self.since)
        deadline = time.monotonic() + LEFTOVER_GRACE
        while server_tree(root, self.since) and time.monotonic() < deadline:
            _reap_orphans(root, self.since)
            time.sleep(POLL_SECONDS)
        if server_tree(root, self.since):
            signal_tree(root, signal.SIGKILL, self.since)
            time.sleep(POLL_SECONDS)
        _reap_orphans(root, self.since)
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


# ---- the report --------------------------------------------------------------------------


def explain(request: RunRequest, outcome: Outcome) -> Report:
    """The incident report of the log, with the command as launched."""
    from analyzer.pipeline import Options, analyze

    report = analyze(
        [str(request.log)],
        Options(command=shlex.join(request.argv), sglang_version=request.sglang_version),
    )
    report.warnings.append(f"loganalyze run: {redact_text(outcome.message)}")
    return report


def print_report(report: Report, colour: bool) -> None:
    from analyzer.formats.terminal import render_plain, render_rich

    if colour:
        from rich.console import Console

        render_rich(report, Console(highlight=False, soft_wrap=False))
        return
    sys.stdout.write(render_plain(report))
    sys.stdout.flush()


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
        say_to_stderr(f"the server ended at once: {_exit_text(state.exit)} (log: {request.log})")
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


# ---- detached ----------------------------------------------------------------------------


def start_detached(request: RunRequest) -> RunState:
    """Start a background supervisor (its own session) and wait until the server is started."""
    args = [sys.executable, "-m", "analyzer.run.supervise", "--log", str(request.log)]
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
    """The detached supervisor: `python -m analyzer.run.supervise --log L [...] -- COMMAND`."""
    parser = argparse.ArgumentParser(prog="analyzer.run.supervise")
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


# ---- status ------------------------------------------------------------------------------


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
        headline = _exit_text(state.exit)
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


def _exit_text(exit_info: dict[str, Any]) -> str:
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


if __name__ == "__main__":
    sys.exit(background_main())

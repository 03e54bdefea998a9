"""A stand-in for `sglang serve` that behaves like SGLang at startup, for tests/test_supervise.py.

Run as `fake_sglang.py [serve] --model-path M [--host H] [--port P] ...`: the arguments are a
real SGLang command (so pre-flight accepts them); the behaviour comes from the environment,
which keeps it out of the command:

  FAKE_SGLANG_MODE   ready (default): startup lines, /health on --host/--port, the ready
                     line, then serve until killed (at most FAKE_SGLANG_LIFETIME seconds)
                     health: the same without the ready line (ready only via /health)
                     oom: startup lines and the KV-cache OOM traceback, exit 1
                     kill: startup lines, then SIGKILL itself (as the OOM killer would)
                     hang: startup lines, then nothing (at most FAKE_SGLANG_LIFETIME seconds)
  FAKE_SGLANG_CHILD  group: start a "scheduler" child in our process group; session: one in
                     its own session (escapes the group, as some launchers do)
  FAKE_SGLANG_PIDS   a file to write our pid and the scheduler's pid to (one per line)
  FAKE_SGLANG_LIFETIME  seconds before a server or hang gives up by itself (default 120),
                     so a broken test never leaves a process behind for long

The lines printed are SGLang's own, taken from the fixtures: the startup and the OOM
traceback of fixtures/source/oom_kv_cache_tp8.log, and the server lines of
fixtures/negative/healthy_speculative_eagle3.log.
"""

from __future__ import annotations

import http.server
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
OOM_LOG = FIXTURES / "source" / "oom_kv_cache_tp8.log"
HEALTHY_LOG = FIXTURES / "negative" / "healthy_speculative_eagle3.log"
READY = "The server is fired up and ready to roll!"
CRASH_START = "Scheduler hit an exception"


def fixture_lines(path: Path) -> list[str]:
    """The fixture's lines without the `+ python ...` launch line of its wrapper script."""
    lines = path.read_text("utf-8").splitlines()
    return [line for line in lines if not line.startswith("+ ")]


def startup_lines() -> list[str]:
    lines = fixture_lines(OOM_LOG)
    crash = next(i for i, line in enumerate(lines) if CRASH_START in line)
    return lines[:crash]


def serving_lines() -> tuple[list[str], str]:
    """The healthy log's lines before its ready line, and the ready line itself."""
    lines = fixture_lines(HEALTHY_LOG)
    ready = next(i for i, line in enumerate(lines) if READY in line)
    return lines[:ready], lines[ready]


def emit(lines: list[str]) -> None:
    for line in lines:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def option(argv: list[str], name: str, default: str) -> str:
    for i, word in enumerate(argv):
        if word == name and i + 1 < len(argv):
            return argv[i + 1]
        if word.startswith(name + "="):
            return word.split("=", 1)[1]
    return default


class Health(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - the http.server API
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def serve_health(host: str, port: int) -> None:
    server = http.server.ThreadingHTTPServer((host, port), Health)
    threading.Thread(target=server.serve_forever, daemon=True).start()


def start_scheduler(kind: str) -> int | None:
    if kind not in ("group", "session"):
        return None
    lifetime = os.environ.get("FAKE_SGLANG_LIFETIME", "120")
    child = subprocess.Popen(
        [sys.executable, "-c", f"import time; time.sleep({float(lifetime)})"],
        start_new_session=kind == "session",
    )
    return child.pid


def main() -> int:
    argv = sys.argv[1:]
    mode = os.environ.get("FAKE_SGLANG_MODE", "ready")
    lifetime = float(os.environ.get("FAKE_SGLANG_LIFETIME", "120"))
    scheduler = start_scheduler(os.environ.get("FAKE_SGLANG_CHILD", ""))
    pid_file = os.environ.get("FAKE_SGLANG_PIDS")
    if pid_file:
        pids = [os.getpid(), *([scheduler] if scheduler else [])]
        Path(pid_file).write_text("".join(f"{pid}\n" for pid in pids), "utf-8")
    if mode == "oom":
        emit(fixture_lines(OOM_LOG))
        return 1
    if mode in ("ready", "health"):
        before, ready = serving_lines()
        emit(before)
        serve_health(option(argv, "--host", "127.0.0.1"), int(option(argv, "--port", "30000")))
        if mode == "ready":
            emit([ready])
        time.sleep(lifetime)
        return 0
    emit(startup_lines())
    if mode == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    time.sleep(lifetime)
    return 3


if __name__ == "__main__":
    sys.exit(main())

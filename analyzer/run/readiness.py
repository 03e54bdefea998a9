"""Readiness polling: the log followed for SGLang's ready line, and the health URL.

The supervisor follows the log file the child writes into, to tee it to the terminal
and to see SGLang's "fired up and ready to roll" line; with `--health-url`, a thread
polls it for a 2xx. Whichever comes first makes the server ready.
"""

from __future__ import annotations

import http.client
import threading
import urllib.request
from pathlib import Path
from typing import IO

from analyzer.engine.scan import READY_MARKER

HEALTH_INTERVAL = 0.5
MAX_CARRY = 64 * 1024


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

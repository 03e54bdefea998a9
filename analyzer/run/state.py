"""What a run is: the request, the JSON state file beside the log, and their paths.

Nothing the child writes passes through the supervisor, so when the supervisor is killed
the server and its log go on; the state file (written atomically, read without any
process alive) still tells `loganalyze status` where to look.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from analyzer.core import bounded_json

STATE_SUFFIX = ".run.json"
STATE_SCHEMA = 1


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
            data = bounded_json.loads(path.read_text("utf-8"))
            known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
            return cls(**known)
        except (OSError, ValueError, TypeError) as exc:
            raise RunError(f"{path}: not a readable loganalyze run state ({exc})") from None


def state_path_for(log: Path) -> Path:
    return log.with_name(log.name + STATE_SUFFIX)


def default_log_path(now: datetime | None = None) -> Path:
    stamp = (now or datetime.now()).strftime("%Y%m%d-%H%M%S")
    return Path(f"sglang-{stamp}.log")

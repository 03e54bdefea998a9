"""The failure-signal stage: every line that shows a failure, whatever a rule knows of it.

Its only job is recall. A line is a failure signal when it holds

- a message of a library's catalog (failure_messages.json: the CUDA runtime's, NCCL's,
  torch's, Triton's, the dynamic linker's, transformers' and huggingface_hub's), by its text,
  wherever it stands: inside a JSON string, a quote, an HTTP body, after any prefix;
- a process death: a signal's name as the shell reports it, `(core dumped)`, `Fatal Python
  error`, a C++ `terminate called`, a non-zero exit status, SGLang's `hit an exception`,
  `Received sigquit`, `crashed with exit code`, a Rust or Go panic, a Kubernetes container
  in CrashLoopBackOff or OOMKilled;
- argparse's `error:` line, a CUDA kernel's failed device-side assertion, an `Error:` line,
  a tool's failure around the launch (a shell's `command not found`, docker, curl, ssh, git,
  nvidia-smi), a Python traceback's header with nothing after it;
- an ERROR / FATAL / CRITICAL level, or a glog `E`/`F` line.

A line at a WARNING / INFO / DEBUG level (or a Python warning) is not a signal unless it
reports a death. The scanner calls `signal_of` on the lines it is fed (SIGNAL_LITERALS make
the fast path feed them), so the whole stage is one Aho-Corasick pass per line.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import NamedTuple

try:
    from ahocorasick_rs import AhoCorasick, Implementation
except ImportError:  # pragma: no cover - a declared dependency
    AhoCorasick = None

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import FailureSignal, Line
from analyzer.core.package_files import package_files
from analyzer.core.parse_cache import cached

CATALOG_NAME = "failure_messages.json"

# kind -> (literals that may show it, the class it gives when no catalog entry does)
DEATH_LITERALS = (
    "Killed", "Segmentation fault", "Aborted", "Bus error", "Illegal instruction",
    "Floating point exception", "core dumped", "Fatal Python error", "terminate called",
    "hit an exception", "Received sigquit", "SIGQUIT received", "crashed with exit code",
    "xit code", "xitcode", "xit status", "xited with code", "xit Code", "xited with status",
    "panicked at", "panic: ", "CrashLoopBackOff", "OOMKilled", "ImagePullBackOff",
    "ErrImagePull", "Back-off restarting failed", "signal terminated program",
    "received at time=", "Memory access fault by GPU", "died unexpectedly",
    "Main process exited, code=", "Failed with result '", "Exited (", "zsh: ",
)  # fmt: skip
ERROR_LITERALS = ("error: ", "Error: ", "ERROR", "FATAL", "CRITICAL", "Assertion `", "level=error",
                  '"level":"error"', '"level": "error"', "CUDA error", "NCCL error")  # fmt: skip
GLOG_LITERALS = tuple(f"{level}{month:02d}" for level in "EF" for month in range(1, 13))
# what the tools around a launch print when they fail (TOOL_ERROR), and a Python traceback's
# header or chain marker with no exception after it (a paste cut there)
TOOL_LITERALS = ("command not found", ": not found", "Error response from daemon", "curl: (",
                 "ssh: connect to host", "ssh: Could not resolve", "fatal: ",
                 "NVIDIA-SMI has failed", "No devices were found", "npm ERR!", "failed to start",
                 "imeout waiting for", "imed out waiting for", "did not start within",
                 "exited unexpectedly", ": *** ", "nvcc fatal", "ninja: build stopped",
                 "Error(", "HTTP/1.1 5", "HTTP/1.0 5", "HTTP/2 5", "Bad Gateway", "Service Unavailable",
                 "Internal Server Error", "Gateway Time", '"object":"error"',
                 '"object": "error"', "[E ", "[F ", "[E0", "[E1", "[F0", "[F1", "[Errno ",
                 ": No module named ", ": can't open file ")  # fmt: skip
TRACEBACK_LITERALS = ("Traceback (most recent call last)", "During handling of the above exc",
                      "The above exception was the direct cause")  # fmt: skip
# what the shell, CPython and the C++ runtime print when a process dies
DEATH = LazyPattern(
    r"(?:^|: line \d+: +\d+ +|\[\d+\][+-]? +)"
    r"(?:Killed|Segmentation fault|Aborted|Bus error|Illegal instruction|Floating point exception)"
    r"(?: +\(core dumped\))?(?:\s|$)"
    r"|\(core dumped\)|Fatal Python error: |terminate called (?:after throwing|without an active)"
    r"| hit an exception|Received sigquit|SIGQUIT received|crashed with exit code"
    r"|\bKilled process \d+"
    # Rust's default panic hook (std/src/panicking.rs; SGLang's router is Rust) and Go's
    # runtime (runtime/panic.go printpanics)
    r"|\bthread '[^'\n]*' panicked at |^panic: "
    # the kubelet's container reasons (pkg/kubelet/container/sync_result.go,
    # pkg/kubelet/images/types.go; the runtime's OOMKilled) and its back-off event
    r"|\b(?:CrashLoopBackOff|OOMKilled|ImagePullBackOff|ErrImagePull)\b"
    r"|Back-off restarting failed container"
    # gcc's driver when the compiler it ran was killed (gcc.cc: `%s signal terminated program
    # %s`): a kernel build out of memory
    r"|\bsignal terminated program \S"
    # abseil's failure signal handler (failure_signal_handler.cc), ROCr's GPU memory fault,
    # Ray's and others' word that a worker or actor died
    r"|\*\*\* SIG[A-Z]+ received at time=|\bMemory access fault by GPU node-\d"
    r"|\bdied unexpectedly\b"
    # systemd's service (src/core/service.c, unit.c), docker's `ps` state, zsh's job report
    r"|Main process exited, code=(?:killed|dumped)|Main process exited, code=exited, status=[1-9]"
    r"|: Failed with result '(?!success)|\bExited \((?!0\))-?\d+\) "
    r"|^zsh: (?:killed|segmentation fault|abort|bus error|illegal hardware instruction)\b"
)
# a non-zero exit status (docker, kubectl, torch elastic, subprocess, systemd)
EXIT_STATUS = LazyPattern(
    r"\b[Ee]xit(?:ed with)? ?(?:[Cc]ode|[Ss]tatus)(?:: *| *: | |=)(?P<code>-?\d+)"
    r"|\b[Ee]xitcode: ?(?P<code2>-?\d+)"
)
ARGPARSE_ERROR = LazyPattern(r"^(?:[\w./\- ]+: )?error: \S")
# `Error: ...` opening a line or a logger record's message (`http_utils.py:153 - Error: ...`)
ERROR_LINE = LazyPattern(r"(?:^\W{0,4}|\s-\s)(?:Error|ERROR|error)(?: \w+)?: \S")
DEVICE_ASSERT = LazyPattern(r"Assertion `.+` failed")
# bash (execute_cmd.c `%s: command not found`), zsh, dash (`sh: 1: x: not found`), docker's
# CLI (`Error response from daemon: `), OpenSSH (sshconnect.c),
# git (usage.c die: `fatal: `), nvidia-smi without a driver, npm
TOOL_ERROR = LazyPattern(
    r"(?:^|: )(?:line \d+: )?[^\s:]+: command not found\s*$|^(?:zsh: )?command not found: \S"
    r"|^\S+: \d+: [^:]+: not found\s*$|Error response from daemon: \S"
    r"|^ssh: (?:connect to host |Could not resolve hostname )|^fatal: \S"
    r"|^NVIDIA-SMI has failed |^No devices were found\s*$|^npm ERR! "
    # a kernel built from source: GNU make (job.c `*** [%s] Error %d`), nvcc, ninja (build.cc)
    r"|^\S*make(?:\[\d+\])?: \*\*\* |\bnvcc fatal\s*: |^ninja: build stopped: "
    # a launcher's or harness's word that the server never came up (SGLang's own test_utils
    # popen_launch_server: `Server failed to start within the timeout period`)
    r"|\b[Ss]erver failed to start\b|\bfailed to start (?:within|in|after) \S"
    r"|\bT(?:imeout|imed out) waiting for (?:the )?(?:server|worker|engine|health)"
    r"|\bt(?:imeout|imed out) waiting for (?:the )?(?:server|worker|engine|health)"
    r"|\bdid not start within\b|\bexited unexpectedly\b"
    # an exception line with its wrapped cause (Ray's `RayTaskError(RuntimeError): `); an
    # OSError's text without its type (Objects/exceptions.c `[Errno %d] %s`); CPython itself
    # refusing to start (Modules/main.c: `-m` of a missing module, a missing script)
    r"|^[\w.]*Error\([\w.]+\): \S|^\[Errno \d+\] \S"
    r"|^\S*python[\d.]*(?:\.exe)?: (?:No module named |can't open file )"
)
# curl's failed request (src/tool_operate.c: `curl: (%d) %s`): a client's, as a health poll
# while the server starts prints it
CLIENT_TOOL = LazyPattern(
    r"^curl: \(\d+\) \S"
    # a server's 5xx as a client shows it: the status line, the reason alone, an OpenAI-style
    # error object (SGLang's ErrorResponse: `"object": "error"`)
    r"|^HTTP/\d(?:\.\d)? 5\d\d\b|^5\d\d (?:Internal Server Error|Bad Gateway|Service Unavailable"
    r"|Gateway Time-?out)\b|\"object\": ?\"error\"|\"detail\": ?\"Internal Server Error\""
)
TRACEBACK_MARK = LazyPattern(
    r"^(?:Traceback \(most recent call last\):|During handling of the above exception, another"
    r" exception occurred:|The above exception was the direct cause of the following exception:)"
    r"\s*$"
)
LEVEL = LazyPattern(
    r"(?:^|[\s\[|(])(?:ERROR|FATAL|CRITICAL)(?:[\]\s|):,]|$)"
    r'|\blevel=(?:error|fatal|critical)\b|"level": ?"(?:error|fatal|critical)"'
    r"|^[EF]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ "
    # c10's own log lines (c10/util/Logging.cpp without glog): `[E socket.cpp:957] ...`
    r"|(?:^|[\s:])\[[EF](?:\d{4} [\d:.]+(?: +\d+)?)? ?[\w./-]+\.\w+:\d+\]"
)
QUIET_LEVEL = LazyPattern(
    r"(?:^|[\s\[|(])(?:WARNING|WARN|INFO|DEBUG|TRACE)(?:[\]\s|):,]|$)|\w+Warning: "
    r"|^[WI]\d{4} \d\d:\d\d:\d\d\.\d+ +\d+ "
)
# not the server's own failure: SGLang's models/registry.py logs a model module it skipped (a
# healthy start's noise); srt/utils/request_logger.py RequestLogger logs each request's text
QUIET_RECORDS = ("Ignore import error when loading ", "Receive: obj=", "Finish: obj=")
GENERIC_CLASS = {"cuda": "cuda_error", "nccl": "nccl_distributed"}
MAX_SIGNALS = 200


class CatalogEntry(NamedTuple):  # a tuple: the parse cache unpickles ~570 of them each run
    key: str
    message: str
    rule_class: str
    advice: str
    source: str
    kind: str


@cache
def catalog_entries() -> tuple[CatalogEntry, ...]:
    """The message catalog, parsed once and kept between runs (core/parse_cache.py)."""
    path = package_files(__package__).joinpath(CATALOG_NAME)
    return cached("signals", [path, Path(__file__)], lambda: _parse_catalog(path))


def _parse_catalog(path: Path) -> tuple[CatalogEntry, ...]:
    data = json.loads(path.read_text("utf-8"))
    return tuple(
        CatalogEntry(e["key"], e["message"], e["class"], e["advice"], e["source"], e["kind"])
        for e in data["entries"]
    )


# the CUDA runtime's, cuBLAS's and cuDNN's error names: one literal each for the hot path,
# the name itself looked up once a line holds one
NAME_PREFIXES = ("cudaError", "CUDA_ERROR_", "CUBLAS_STATUS_", "CUDNN_STATUS_")
NAMED = LazyPattern(r"\b(?:cudaError|CUDA_ERROR_|CUBLAS_STATUS_|CUDNN_STATUS_)\w+")


@cache
def _catalog_index() -> tuple[tuple[str, ...], tuple[int, ...], dict[str, int]]:
    """The catalog's searched keys with their entries, and its error names' entries."""
    keys: list[str] = []
    owners: list[int] = []
    names: dict[str, int] = {}
    for index, entry in enumerate(catalog_entries()):
        if entry.key.startswith(NAME_PREFIXES) and entry.key.isidentifier():
            names[entry.key] = index
        else:
            keys.append(entry.key)
            owners.append(index)
    return tuple(keys), tuple(owners), names


def signal_literals() -> tuple[str, ...]:
    """Every literal a failure signal holds: the fast path feeds the lines holding one."""
    keys = _catalog_index()[0]
    return (*DEATH_LITERALS, *ERROR_LITERALS, *GLOG_LITERALS, *TOOL_LITERALS,
            *TRACEBACK_LITERALS, *NAME_PREFIXES, *keys)  # fmt: skip


@cache
def _automaton() -> tuple[object, tuple[str, ...], int, int]:
    literals = signal_literals()
    automaton = (
        AhoCorasick(list(literals), implementation=Implementation.NoncontiguousNFA)
        if AhoCorasick is not None
        else None
    )
    first_key = len(literals) - len(_catalog_index()[0])
    return automaton, literals, first_key, len(DEATH_LITERALS)


def _found(text: str) -> list[int]:
    automaton, literals, _, _ = _automaton()
    if automaton is None:
        return [i for i, lit in enumerate(literals) if lit in text]
    return [i for i, _start, _end in automaton.find_matches_as_indexes(text)]  # type: ignore[attr-defined]


def _catalog_hits(text: str, found: list[int], first_key: int) -> list[int]:
    """The catalog entries a line holds: by a searched key, or by an error name."""
    _, owners, names = _catalog_index()
    hits = [owners[i - first_key] for i in found if i >= first_key]
    if any(prefix in text for prefix in NAME_PREFIXES):
        hits += [names[n] for n in NAMED.findall(text) if n in names]
    return hits


def signal_of(line: Line) -> FailureSignal | None:
    """The failure a line shows, if any (kind: catalog, death, argparse, error, level)."""
    text = line.text
    found = _found(text)
    if not found:
        return None
    _, _, first_key, deaths = _automaton()
    if any(record in text for record in QUIET_RECORDS):
        return None
    if any(i < deaths for i in found) and _is_death(text):
        return FailureSignal(line, "death")
    if QUIET_LEVEL.search(text):
        return None
    keys = _catalog_hits(text, found, first_key)
    if keys:
        entries = catalog_entries()
        best = max(keys, key=lambda i: len(entries[i].key))
        return FailureSignal(line, "catalog", best)
    body = line.body.strip()
    if DEVICE_ASSERT.search(text):
        return FailureSignal(line, "device_assert")
    if ARGPARSE_ERROR.match(body):
        return FailureSignal(line, "argparse")
    if ERROR_LINE.search(body):
        return FailureSignal(line, "error")
    if TRACEBACK_MARK.match(body.strip()):
        return FailureSignal(line, "traceback")
    if "CUDA error" in text or "NCCL error" in text:
        return FailureSignal(line, "cuda" if "CUDA error" in text else "nccl")
    if LEVEL.search(text):
        return FailureSignal(line, "level")
    if TOOL_ERROR.search(body):
        return FailureSignal(line, "error")
    if CLIENT_TOOL.search(body.strip()):
        return FailureSignal(line, "client")
    return None


def _is_death(text: str) -> bool:
    if DEATH.search(text.strip()):
        return True
    status = EXIT_STATUS.search(text)
    return bool(status) and (status["code"] or status["code2"]) not in ("0", None)


def note_signal(signals: list[FailureSignal], line: Line) -> None:
    """Keep the signal a line shows (bounded)."""
    if len(signals) < MAX_SIGNALS and (found := signal_of(line)) is not None:
        signals.append(found)

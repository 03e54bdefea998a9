"""The session's clients that failed beside the server: what they printed, and whose it was.

Every shell call that is not a launch and showed no server log is read for a client's
failure (engine/clients.py says whose a traceback is):

- a Python traceback with no server frame: a benchmark's, a user's script's, a training
  job's read from another pane (`tmux capture-pane`); also one the user pasted;
- curl's own errors: `(7) Failed to connect`, `(6)` an unknown host, `(3)` a bad URL,
  `(22)` with a 4xx status; not inside a poll loop, whose failures are expected;
- the error answers SGLang sends, as curl prints them: `{"object": "error", ..., "code":
  4xx}` (serving_base.create_error_response), `{"error": {"message": ...}}`
  (http_server._create_error_response), FastAPI's `{"detail": ...}`, a 4xx status line;
  and what the `client_error` line rules recognise (a request too long, the router's 501);
- bench_serving's exits without a traceback (`No model specified or found`, `Server at URL
  is not ready. Exiting.`).

A failure that only says the server could not be reached is the client's when the server
answered after it (the same attempt's ready line or answered poll; with no launch in the
session, an answered poll): a client that ran before the server was ready. Otherwise it is
the server's absence, which the attempt's own outcome already tells.
"""

from __future__ import annotations

from collections.abc import Sequence

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import Incident, Traceback
from analyzer.engine.clients import (
    CLIENT_RULE,
    UNREACHABLE,
    client_finding,
    clients_own,
    named_client,
    runs_server_code,
    unreachable,
)
from analyzer.engine.match import match_rules
from analyzer.rulebook.vocabulary import Rule
from analyzer.transcripts import shell
from analyzer.transcripts.command_outputs import CURL_ERROR, NumberedLine
from analyzer.transcripts.events import ShellCall, UserMessage
from analyzer.transcripts.session import (
    ClientFailure,
    LogView,
    Session,
    evidence_line,
    scan_view,
    unique_lines,
)
from analyzer.transcripts.shell import LOOPS, PYTHON, simple_pipelines

HTTP_TOOLS = frozenset({"curl", "wget", "http", "https", "xh"})
# what the HTTP tools print when the server refused the request
ERROR_ANSWER = LazyPattern(
    r'"object"\s*:\s*"error".*"code"\s*:\s*4\d\d\b|'
    r'^\s*(?:data: )?\{\s*"error"\s*:\s*\{\s*"message"\s*:|'
    r'^\s*\{\s*"detail"\s*:|'
    r"^\s*(?:HTTP/[\d.]+ )?4\d\d(?: [A-Za-z ]+)?\s*$"
)
# curl's exit codes that are the command's own doing (7: nothing listened, yet)
CURL_CLIENT_CODES = {"3", "6", "7", "22"}
# bench_serving's exits without a traceback (sglang/benchmark/serving.py run_benchmark)
BENCH_EXITS = LazyPattern(
    r"(?P<usage>No model specified or found\. Please provide a model using `--model`\.|"
    r"Please provide a model (?:using|with) `--model` when using \w+ backend|"
    r"\S+ dataset is unsupported for embeddings benchmark)|"
    r"(?P<unreachable>Server at \S+ is not ready\. Exiting\.|Failed to fetch model from \S+ Error: .*)"
)
# programs that only move text or wait: the client is the program they wrap or feed
PLUMBING = frozenset(
    {"cd", "echo", "printf", "sleep", "export", "source", ".", "true", "set", "cat", "tail",
     "head", "grep", "tee", "sed", "awk", "wc", "sort", "jq", "ls", "uv", "conda", "tmux",
     "bash", "sh", "zsh", "ssh", "docker", "kubectl"}
)  # fmt: skip
LAUNCHERS = frozenset({"torchrun", "accelerate", "deepspeed", "mpirun", "srun"})
# installing and building are the environment's business, not a client's
SETUP_TOOLS = frozenset(
    {"pip", "pip3", "apt", "apt-get", "git", "conda", "mamba", "make", "cmake", "ninja",
     "nvcc", "nvidia-smi", "huggingface-cli", "hf"}
)  # fmt: skip
MAX_FAILURES = 100
MAX_EVIDENCE = 8


def in_call(call: ShellCall, level: shell.Level, rules: Sequence[Rule]) -> list[ClientFailure]:
    """The client failures one call's output shows (it launched nothing, showed no log)."""
    lines = list(call.output_lines())
    if not any(text.strip() for _, text in lines):
        return []
    commands = [c for pipeline in simple_pipelines(level) for c, _ in pipeline]
    programs = {shell.program(c) for c in commands}
    client = runner(commands)
    if client in SETUP_TOOLS:
        return []
    found = _tracebacks(lines, call.ref, client)
    if programs & HTTP_TOOLS:
        looped = any(c.values and c.values[0] in LOOPS for c in commands)
        found += _http_failures(lines, looped)
    found += _bench_exits(lines, client)
    found += _rule_failures(lines, call.ref, rules, client)
    for failure in found:
        failure.ref, failure.command = call.ref, call.command
    return _one_per_line(found)


def in_message(message: UserMessage) -> list[ClientFailure]:
    """Tracebacks the user pasted from another program (its own frames name it)."""
    if "Traceback" not in message.text and 'File "' not in message.text:
        return []
    first = message.line if message.line is not None else 1
    lines = [(first + k, t) for k, t in enumerate(message.text.split("\n"))]
    return _tracebacks(lines, message.ref, None)


def runner(commands: list[shell.Command]) -> str | None:
    """The client a command runs, by name: `python -m MOD` MOD, a script's file name, else
    the first program that is not plumbing (curl)."""
    for command in commands:
        index = shell.head(command)
        if index is None:
            continue
        words = command.values[index:]
        base = shell.basename(words[0])
        if base in LOOPS or base == "done":
            continue
        if PYTHON.fullmatch(base) or base in LAUNCHERS or base in ("uv", "conda"):
            target = _python_target(words)
            if target:
                return target
        if base.endswith((".py", ".sh")):
            return base
        if base in shell.SHELLS:
            scripts = [w for w in words[1:] if w.endswith((".sh", ".py"))]
            if scripts:
                return shell.basename(scripts[0])
        if base not in PLUMBING and not PYTHON.fullmatch(base):
            return base
    return None


def _python_target(words: list[str]) -> str | None:
    for k, word in enumerate(words):
        if word == "-m" and k + 1 < len(words):
            return words[k + 1]
        if word.endswith(".py"):
            return shell.basename(word)
    return None


def _tracebacks(
    lines: list[NumberedLine], ref: str | None, client: str | None
) -> list[ClientFailure]:
    if not any("Traceback" in t or 'File "' in t for _, t in lines):
        return []
    view = LogView("output", "", lines, ref, None, False)
    found = []
    for traceback in scan_view(view, "", ()).tracebacks:
        if not traceback.frames or runs_server_code(traceback) or not clients_own(traceback):
            continue
        name = named_client(traceback) or client
        if name is None:
            continue
        exception = traceback.exception_line
        message = traceback.exception_message.split("\n", 1)[0][:300]
        found.append(
            ClientFailure(
                name,
                f"{traceback.exception_type}: {message}".rstrip(": "),
                (exception.number, exception.text),
                _traceback_lines(traceback),
                ref,
                unreachable=unreachable(traceback),
            )
        )
    return found


def _traceback_lines(traceback: Traceback) -> list[NumberedLine]:
    frames = [ln for ln in traceback.lines if ln.body.lstrip().startswith('File "')]
    shown = [traceback.first, *frames[-1:], traceback.exception_line]
    return [(ln.number, ln.text) for ln in unique_lines(shown)]


def _http_failures(lines: list[NumberedLine], looped: bool) -> list[ClientFailure]:
    found = []
    for number, text in lines:
        error = CURL_ERROR.search(text)
        if error and not looped and error["code"] in CURL_CLIENT_CODES:
            if error["code"] == "22" and "error: 4" not in error["message"]:
                continue
            found.append(
                ClientFailure(
                    "curl",
                    text.strip(),
                    (number, text),
                    [(number, text)],
                    None,
                    unreachable=error["code"] == "7",
                )  # fmt: skip
            )
        elif ERROR_ANSWER.search(text):
            what = f"the server refused the request: {text.strip()[:300]}"
            found.append(
                ClientFailure("curl", what, (number, text), [(number, text)], None, refused=True)
            )
    return found


def _bench_exits(lines: list[NumberedLine], client: str | None) -> list[ClientFailure]:
    found = []
    for number, text in lines:
        exit_line = BENCH_EXITS.search(text)
        if exit_line:
            name = client or "sglang.bench_serving"
            unreached = exit_line["unreachable"] is not None
            found.append(
                ClientFailure(
                    name,
                    text.strip(),
                    (number, text),
                    [(number, text)],
                    None,
                    unreachable=unreached,
                )  # fmt: skip
            )
    return found


def _rule_failures(
    lines: list[NumberedLine], ref: str | None, rules: Sequence[Rule], client: str | None
) -> list[ClientFailure]:
    """Lines of the client's output that a client_error line rule recognises."""
    triggers = [t for rule in rules for t in rule.triggers]
    if not rules or not any(t in text for _, text in lines for t in triggers):
        return []
    log = scan_view(LogView("output", "", lines, ref, None, False), "", triggers)
    matches, _ = match_rules(list(rules), log)
    found = []
    for m in matches:
        # a client that only says nothing answered is judged like a refused curl (7)
        unreached = bool(UNREACHABLE.search(m.line.body))
        found.append(
            ClientFailure(
                client or "curl",
                m.line.body.strip()[:300],
                (m.line.number, m.line.text),
                [(m.line.number, m.line.text)],
                ref,
                refused=not unreached,
                unreachable=unreached,
            )  # fmt: skip
        )
    return found


def _one_per_line(found: list[ClientFailure]) -> list[ClientFailure]:
    """A line two readers recognised (a traceback's exception also a rule's) counts once."""
    seen: set[int] = set()
    kept = []
    for failure in found:
        if failure.decisive[0] not in seen:
            seen.add(failure.decisive[0])
            kept.append(failure)
    return kept


def client_incidents(session: Session, views: list[Incident], source: str) -> list[Incident]:
    """One finding per client and attempt; the client findings the server's log views gave
    (a client's traceback in a harness log, requests the server refused) unless a client
    the session ran failed in the same attempt (those refusals were its answers)."""
    groups: dict[tuple[int | None, str], list[ClientFailure]] = {}
    for failure in session.clients:
        if failure.unreachable and not _answered_after(failure, session):
            continue
        groups.setdefault((failure.attempt, failure.client), []).append(failure)
    incidents = [_incident(group, source) for group in groups.values()]
    ran = {attempt for attempt, _ in groups}
    seen: set[tuple] = set()
    for finding in views:
        key = (finding.attempt, finding.rule, finding.title.split(" (")[0])
        if key in seen or (finding.rule != CLIENT_RULE and finding.attempt in ran):
            continue
        seen.add(key)
        incidents.append(finding)
    return incidents


def _answered_after(failure: ClientFailure, session: Session) -> bool:
    if failure.attempt is None:
        return session.answered is not None and session.answered > failure.seq
    alive = session.attempts[failure.attempt - 1].last_alive()
    return alive is not None and alive > failure.seq


def _incident(group: list[ClientFailure], source: str) -> Incident:
    first = group[0]
    lines = [evidence_line(source, line, f.ref) for f in group for line in f.lines]
    evidence = unique_lines(lines)[:MAX_EVIDENCE]
    ran = f" (`{_short(first.command)}`)" if first.command else ""
    what = f"{first.what.rstrip('.')}{ran}."
    if len(group) > 1:
        what += f" {len(group)} failures like it."
    if first.unreachable:
        what += " The server answered later: the client ran before the server was ready."
    decisive = evidence_line(source, first.decisive, first.ref)
    incident = client_finding(first.client, what, decisive, evidence)
    incident.attempt = first.attempt
    if first.unreachable:
        incident.advice = [
            f"Start {first.client} once the server answers: poll /health until it returns 200 "
            "(or wait for `The server is fired up and ready to roll!`); the server needs no "
            "change."
        ]
    elif first.refused:
        incident.advice = [
            f"Fix the request {first.client} sent (the server's answer says what it refused); "
            "the server needs no change."
        ]
    return incident


def _short(command: str, limit: int = 160) -> str:
    flat = " ".join(command.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"

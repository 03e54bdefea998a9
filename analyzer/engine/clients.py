"""A client's failure next to a healthy server: who failed, and whether it was theirs.

A client is any program beside the server that is not the server: SGLang's benchmark
(`sglang.bench_serving`, `sglang/benchmark/`), a frontend-language program (`sglang/lang/`), a user's script, curl, a training job on
other GPUs. Its failure is a `client_error` finding of severity info that names it: never a
server incident, and never in the way of one (a server that failed too keeps the verdict).

- a traceback is a client's when none of its frames runs server code (`sglang/srt/`); it is
  named by the SGLang client module it ran in, else by the script it started from;
- one that reports a 5xx answer says the server failed: it is not the client's;
- one that only says the server could not be reached (refused, reset, timed out) is the
  client's where the server is seen answering after it (a client started too early); a
  transcript shows that, a log alone cannot, so there it stays the client's;
- a request SGLang answered with 400, 413 or 422 (uvicorn's access line) is an http
  client's failure: the server was up to refuse it.
"""

from __future__ import annotations

import dataclasses

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import Frame, Incident, Line, Traceback

CLIENT_RULE = "client-error"
REFUSED_RULE = "request-refused"
# a client's findings come after every server incident of the same input or attempt
# a traceback is the server's when one of its frames runs server code
SERVER_CODE = ("sglang/srt/", "sglang/launch_server.py", "sglang/cli/")
# SGLang's HTTP clients: their failures are the benchmark's, not the server's
CLIENT_CODE = {
    "sglang/bench_serving.py": "sglang.bench_serving",
    "sglang/benchmark/": "sglang.bench_serving",
}
# the frontend language's RuntimeEndpoint posts to the server over HTTP (0.1.x kept its
# backends in sglang/backend/, later sglang/lang/backend/); `import sglang` runs through it
# too, so only a frame running a call there (not a module being imported) is the client's
FRONTEND_CODE = ("sglang/lang/", "sglang/backend/")
FRONTEND = "sglang frontend program"
LIBRARY_CODE = ("site-packages", "dist-packages", "<frozen", "/lib/python", "<string>")
# the server answered with an error of its own: openai-python, requests, urllib, aiohttp,
# httpx, bench_serving's `response.reason + ": " + text`, and the clients that print
# `Server error: 500 - [address=..., pid=...] <the server's message>`
SERVER_ANSWERED = LazyPattern(
    r"Error code: 5\d\d\b|HTTP Error 5\d\d\b|\b5\d\d Server Error\b|\b5\d\d, message=|"
    r"[Ss]erver error '5\d\d|[Ss]erver error: 5\d\d\b|InternalServerError|"
    r"Error: (?:Internal Server Error|Bad Gateway|Service Unavailable|Gateway Timeout)\b"
)
# the client never got an answer: the server was not (yet) there, or went away
UNREACHABLE = LazyPattern(
    r"Connection(?:Refused|Reset|Aborted)?Error|APIConnectionError|ClientConnectorError|"
    r"ServerDisconnectedError|RemoteDisconnected|NewConnectionError|MaxRetryError|"
    r"ConnectError|ConnectTimeout|ReadTimeout|APITimeoutError|TimeoutError|"
    r"Connection refused|Cannot connect to host|Failed to establish a new connection"
)
# the process serving the client died under it (ray/exceptions.py: an actor's or a task's
# worker process died): the server's failure, not the client's
SERVER_DIED = LazyPattern(r"\b(?:ActorDiedError|WorkerCrashedError)\b|worker process has died")
# an exception about SGLang's own installation is the environment's, not a client's: its
# packages (sglang, and the sgl_kernel ops it is built with) missing, or a compiled module of
# sgl_kernel the dynamic linker cannot load (`.../sgl_kernel/common_ops.abi3.so: undefined
# symbol: ...`), whatever script imported it
SGLANG_IMPORT = LazyPattern(
    r"No module named '?(?:sglang|sgl_kernel)|cannot import name .* from '?(?:sglang|sgl_kernel)|"
    r"/sgl_kernel/\S+\.so\b"
)
# uvicorn's access line as SGLang configures it, for a request refused for what it carried:
# SGLang's BAD_REQUEST, a body over the size limit, FastAPI's request validation. The mark
# is long so that looking for it costs little on a large log: HTTP/1.0 clients are not seen.
REFUSED_MARK = 'HTTP/1.1" 4'
REFUSED = LazyPattern(
    r'"(?P<request>[A-Z]+ \S+) HTTP/[\d.]+" (?P<status>400|413|422)(?: (?P<reason>[A-Za-z ]+))?'
)
# tokenizer_manager's abort when the client hung up: the 400 logged next is a record of
# a request nobody waits for, not a refusal
CLIENT_GONE = "disconnected from the client side"
HTTP_CLIENT = "http client"
# the HTTP client libraries whose exception types a client raises; the server raises them
# only calling itself in its warmup (http_server._wait_and_warmup), which the warmup rules
# explain, so only an exception no server rule explains is the client's
CLIENT_LIBRARIES = ("openai.", "requests.", "httpx.", "httpcore.", "aiohttp.", "urllib3.")


def client_of(traceback: Traceback | None, unexplained: bool = False) -> str | None:
    """The client a traceback in a log belongs to: SGLang's benchmark or a user's script;
    an exception line pasted alone that no server rule explains (`unexplained`), an HTTP
    client library's (its type qualified by the library's module: `openai.APIConnectionError`,
    `requests.exceptions.ReadTimeout`)."""
    if traceback is None:
        return None
    if not traceback.frames:
        library = unexplained and traceback.exception_type.startswith(CLIENT_LIBRARIES)
        return HTTP_CLIENT if library and not traceback.chain and clients_own(traceback) else None
    if runs_server_code(traceback) or not clients_own(traceback):
        return None
    return named_client(traceback)


def runs_server_code(traceback: Traceback) -> bool:
    return any(marker in f.file for f in _frames(traceback) for marker in SERVER_CODE)


def clients_own(traceback: Traceback) -> bool:
    """False when the exception blames the server (a 5xx answer, its process died) or
    SGLang's install."""
    text = f"{traceback.exception_type}: {traceback.exception_message}"
    blames = (SERVER_ANSWERED, SERVER_DIED, SGLANG_IMPORT)
    return not any(pattern.search(text) for pattern in blames)


def unreachable(traceback: Traceback) -> bool:
    """The client could not reach the server (or lost it): its failure only if the server
    answered afterwards."""
    parts = (traceback, *traceback.chain)
    return any(UNREACHABLE.search(f"{p.exception_type}: {p.exception_message}") for p in parts)


def named_client(traceback: Traceback) -> str | None:
    """SGLang's client module among the frames, else the script the traceback starts in."""
    frames = _frames(traceback)
    for frame in frames:
        for marker, client in CLIENT_CODE.items():
            if marker in frame.file:
                return client
        if frame.function != "<module>" and any(m in frame.file for m in FRONTEND_CODE):
            return FRONTEND
    if not traceback.frames:
        return None
    entry = traceback.frames[0]  # a script run as `python script.py` starts at its <module>
    if entry.function != "<module>" or "sglang" in entry.file:
        return None
    return None if any(m in entry.file for m in LIBRARY_CODE) else entry.file.rsplit("/", 1)[-1]


def _frames(traceback: Traceback) -> list[Frame]:
    return [f for tb in (*traceback.chain, traceback) for f in tb.frames]


def client_incident(incident: Incident, client: str) -> Incident:
    """A client's failure found by a server rule, as the client's own finding."""
    return dataclasses.replace(
        incident,
        **_client_fields(client, incident.explanation),
        offending_flags=[],
        corrected_command=None,
        edits=[],
    )


def client_finding(
    client: str, what: str, line: Line, evidence: list[Line], rule: str = CLIENT_RULE
) -> Incident:
    """A new client_error finding: `what` says how the client failed."""
    return Incident(
        source=line.source,
        line=line.number,
        ranks=[],
        evidence=evidence,
        span=None,
        offending_flags=[],
        **_client_fields(client, what, rule),
    )


def _client_fields(client: str, what: str, rule: str = CLIENT_RULE) -> dict:
    return {
        "rule_class": "client_error",
        "rule": rule,
        "title": f"A client failed, not the server: {client}",
        "severity": "info",
        "explanation": f"{client} failed: {what} This is the client's error; nothing here "
        "shows the server failing.",
        "advice": [
            f"Fix {client}'s own input or code and run it again; the server needs no change."
        ],
    }


def refused_finding(lines: list[Line], total: int, capped: bool) -> Incident:
    """One finding for the requests SGLang refused in one input (their access lines)."""
    statuses = ", ".join(sorted({_status(ln.body) for ln in lines}))
    requests = ", ".join(sorted({_request(ln.body) for ln in lines}))
    count = f"at least {total}" if capped else str(total)
    what = (
        f"SGLang answered {count} request{'s' if total != 1 else ''} ({requests}) with "
        f"{statuses}: the server was up and refused what the client sent (an invalid or "
        "over-long request, a grammar or schema it cannot compile)."
    )
    finding = client_finding(HTTP_CLIENT, what, lines[0], lines, REFUSED_RULE)
    finding.title = f"{finding.title} ({count} refused: {statuses})"
    finding.advice = [
        "Read the error SGLang logged just before each refused request (or the response "
        "body the client got) and fix the request; the server needs no change."
    ]
    return finding


def _status(text: str) -> str:
    found = REFUSED.search(text)
    return f"{found['status']} {found['reason'] or ''}".strip() if found else "4xx"


def _request(text: str) -> str:
    found = REFUSED.search(text)
    return found["request"] if found else "?"

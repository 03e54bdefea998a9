"""`loganalyze mcp`: the agent tools (agent_tools.py) served over stdio with the `mcp` SDK.

Imported only by analyzer/agents/mcp_command.py, after the `[mcp]` extra was found: this module
imports the SDK and pydantic at the top, so that the tools' annotations resolve. One call
runs at a time (the SDK runs each call in a worker thread; the analyzer's caches are not
meant to be shared between threads). Every failure is a one-line tool error, secrets masked,
and the server goes on answering.
"""

# no `from __future__ import annotations`: the SDK reads the tools' annotations at runtime

import logging
import threading
from collections.abc import Callable
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from analyzer import __version__
from analyzer.agents import agent_tools
from analyzer.agents.tool_inputs import DEFAULT_MAX_CHARS, MAX_CHARS_RANGE, ToolInputError
from analyzer.core.read import InputError
from analyzer.engine.redact import redact_text
from analyzer.rulebook.vocabulary import RuleError
from analyzer.sglang.catalog import CatalogError
from analyzer.sglang.error_catalog import ErrorCatalogError

EXPECTED = (ToolInputError, InputError, RuleError, CatalogError, ErrorCatalogError)
MAX_ERROR_CHARS = 2_000
READ_ONLY = ToolAnnotations(readOnlyHint=True, destructiveHint=False, openWorldHint=False)
log = logging.getLogger(__name__)

INSTRUCTIONS = """\
loganalyze: crash forensics for SGLang servers. Call `analyze` as soon as an SGLang launch \
failed (the process exited or crashed, /health or /v1/models never answered, the launch hung): \
it names what failed, the flag that caused it, and a corrected command SGLang accepts that \
keeps every flag you typed. Call `preflight` before launching or relaunching with changed \
flags. `flag` tells how SGLang reads a flag and how that changed across releases; \
`error_catalog` finds the SGLang source line that raised a message and the flags its \
condition reads; `metrics` reads throughput and speculative acceptance of a run. No tool \
launches, stops or changes anything: paths are only read, results are bounded in size and \
secrets are masked."""

ANALYZE = """\
Diagnose an SGLang launch that failed: the server exited or crashed, its health check never \
answered, or startup hung. Give the server's log file(s) or log folder, a coding-agent \
session transcript (Claude Code or Codex JSONL, opencode export/storage/database), or the log \
text itself as `text` (up to 10 MB; save a bigger log to a file and pass its path). Pass the \
launch command as `command` when the log does not print it.

Returns loganalyze's JSON report (the schema of `loganalyze --format json`): `verdict`, and \
`incidents` (the root cause first), each with `class`, `severity`, `offending_flags`, \
`evidence` (log lines with their numbers), `explanation`, `advice`, `corrected_command` (a \
command SGLang accepts that keeps every flag typed, or null), `alternatives`, and \
`fix_outside_command` (true: no flag change fixes it, e.g. other processes hold the GPU). \
Verdict `none` with no incidents: no failure found.

Never launches or stops anything; paths are only read (a folder: its *.log, *.txt, *.gz, \
*.json, *.jsonl). Secrets (tokens, API keys, URL passwords) are masked. The result is at most \
`max_chars` characters; `cut` lists anything cut and where."""

PREFLIGHT = """\
Check an SGLang launch command before running it, or before relaunching with changed flags: \
flags SGLang's parser would reject (typos, ambiguous prefixes, flags removed or renamed \
between releases, bad choices or types), incomplete speculative-decoding settings, model or \
draft paths that do not exist, a log folder that is missing, GPUs other processes already \
fill. Give the command exactly as it will be typed (environment prefix, nohup, redirections, \
an ssh wrapper are all fine) and `folder`, the directory it will run in (relative paths are \
checked there; default: this server's working directory). Over ssh only the flags are checked.

Returns `verdict` (passed or refused), `problems` (blocking ones refuse), `notes`, `edits`, \
`corrected_command` (the command as given with only those edits, itself checked again until \
nothing blocks; null when nothing needs fixing or no safe fix exists), `sglang_version`, and \
`report` (the same as text). Each problem has `check`, `class`, `flags`, `message`, \
`blocking`. With `ask_sglang`, the installed SGLang's own argument parser checks it too \
(`sglang`: its status and message, from a subprocess that parses and resolves the arguments, \
loads no model and opens no port; needs sglang importable here or LOGANALYZE_SGLANG_PYTHON).

Never starts the server: run the corrected command yourself. Secrets are masked."""

FLAG = """\
How SGLang's argument parser reads one flag as typed. `reading`: exact, alias, prefix \
(argparse silently expands an unambiguous prefix: `--speculative-algo` is \
`--speculative-algorithm`), ambiguous (SGLang exits; see `candidates`) or unknown. `option` \
is the full spec (long name, every spelling, dest, type, choices, default, help). For a flag \
this release lacks, `change` says when it was removed or added and what replaced it, and \
`meant` and `similar` name the likely options. `history` is how each shipped SGLang release \
read it, oldest first. Call it when an error names a flag, before adding a flag you are unsure \
of, or when a command from another SGLang version fails. Reads shipped catalogs only."""

ERROR_CATALOG = """\
Find the SGLang source lines that raise an error message. Pass the exception line as the log \
prints it (`ValueError: ...`; the type is optional) or just its message. Returns `sites`, \
each with `where` (file:line in SGLang), `function`, `exception`, the `message` template, the \
`condition` guarding the raise (the source's if or assert) and `flags` / `condition_flags`, \
the server flags that condition reads: the flags to change. `matched_by`: message (the \
message fits the site's template), text (no template fits; sites containing the text) or \
none. Call it for an exception `analyze` left as unknown, or to see which flags a check \
depends on. Reads the shipped error catalog only; results bounded by `max_chars`."""

METRICS = """\
Performance of an SGLang run from its log (no failure needed): decode throughput \
(gen_throughput count/mean/median/p10/p90), speculative acceptance length and rate, running \
and queued requests, token usage, CUDA-graph share, prefill throughput and cache hits, and \
the startup phases with seconds and memory (time to ready). `findings` flag speculative \
decoding that does not pay off. Call it when a server came up but is slow, or to judge an \
EAGLE or EAGLE-3 setting. The JSON of `loganalyze metrics --format json`. Paths are only \
read; secrets masked; the result is at most `max_chars` characters (`cut` says where)."""

Paths = Annotated[
    list[str] | str | None,
    Field(description="Log files, log folders or session transcripts (.gz and .zst are read)."),
]
Text = Annotated[str | None, Field(description="The log text itself, pasted (up to 10 MB).")]
Version = Annotated[
    str | None,
    Field(description="Judge with this SGLang release's catalog (default: as the input shows)."),
]
MaxChars = Annotated[
    int,
    Field(
        description="Most characters of the result; what does not fit is cut (see `cut`).",
        ge=MAX_CHARS_RANGE[0],
        le=MAX_CHARS_RANGE[1],
    ),
]
_one_call = threading.Lock()


def build_server() -> MCPServer:
    """The server with its five tools (nothing is read until a tool is called)."""
    server = MCPServer(
        "loganalyze", instructions=INSTRUCTIONS, version=__version__, log_level="WARNING"
    )

    @server.tool(description=ANALYZE, annotations=READ_ONLY)
    def analyze(
        paths: Paths = None,
        text: Text = None,
        command: Annotated[
            str | None, Field(description="The launch command, when the log does not show it.")
        ] = None,
        sglang_version: Version = None,
        max_chars: MaxChars = DEFAULT_MAX_CHARS,
    ) -> dict[str, Any]:
        return _answer(agent_tools.analyze_logs, paths, text, command, sglang_version, max_chars)

    @server.tool(description=PREFLIGHT, annotations=READ_ONLY)
    def preflight(
        command: Annotated[str, Field(description="The launch command, as it will be typed.")],
        folder: Annotated[
            str | None, Field(description="The directory the command will run in.")
        ] = None,
        sglang_version: Annotated[
            str | None, Field(description="The SGLang release it will run (default: newest).")
        ] = None,
        ask_sglang: Annotated[
            bool, Field(description="Also ask the installed SGLang's own argument parser.")
        ] = False,
    ) -> dict[str, Any]:
        return _answer(agent_tools.preflight, command, folder, sglang_version, ask_sglang)

    @server.tool(description=FLAG, annotations=READ_ONLY)
    def flag(
        flag: Annotated[
            str, Field(description="A flag as typed, e.g. --tp or --speculative-algo.")
        ],
        sglang_version: Annotated[
            str | None, Field(description="The SGLang release (default: the newest shipped).")
        ] = None,
    ) -> dict[str, Any]:
        return _answer(agent_tools.flag_reading, flag, sglang_version)

    @server.tool(description=ERROR_CATALOG, annotations=READ_ONLY)
    def error_catalog(
        message: Annotated[str, Field(description="The exception line or its message.")],
        exception_type: Annotated[
            str | None, Field(description="The exception class, e.g. ValueError (optional).")
        ] = None,
        sglang_version: Annotated[
            str | None, Field(description="The SGLang release (default: the newest shipped).")
        ] = None,
        max_chars: MaxChars = DEFAULT_MAX_CHARS,
    ) -> dict[str, Any]:
        return _answer(agent_tools.error_sites, message, exception_type, sglang_version, max_chars)

    @server.tool(description=METRICS, annotations=READ_ONLY)
    def metrics(
        paths: Paths = None, text: Text = None, max_chars: MaxChars = DEFAULT_MAX_CHARS
    ) -> dict[str, Any]:
        return _answer(agent_tools.log_metrics, paths, text, max_chars)

    return server


def _answer(tool: Callable[..., dict[str, Any]], *args: Any) -> dict[str, Any]:
    """One tool call, alone; any failure a one-line tool error with secrets masked."""
    with _one_call:
        try:
            return tool(*args)
        except EXPECTED as exc:
            raise ToolError(_one_line(str(exc))) from None
        except Exception as exc:  # noqa: BLE001 - the promise: an error line, never a crash
            log.exception("loganalyze tool %s failed", tool.__name__)
            raise ToolError(_one_line(f"internal error: {exc!r}")) from None


def _one_line(message: str) -> str:
    text = " ".join(redact_text(message).split())
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + " [cut]"


def serve() -> None:
    build_server().run("stdio")

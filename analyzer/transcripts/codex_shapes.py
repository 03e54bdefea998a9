"""The text shapes inside a Codex rollout: tool output headers, patches, code-mode cells.

Followed from openai/codex codex-rs:
- `core/src/tools/handlers/unified_exec.rs` (`format_response`, later
  `ExecCommandToolOutput::response_text` in tools/context.rs): `Chunk ID: X`, `Wall time:
  N seconds`, `Process exited with code N` (once the process ended), `Process running
  with session ID N` (still running: read on with `write_stdin`), `Original token count:
  N`, then `Output:` and the output;
- the shell tools' text form (`format_exec_output_for_model_freeform`): `Exit code: N`,
  `Wall time: N seconds`, optional `Total output lines: N`, `Output:`; the older JSON form
  `{output, metadata: {exit_code, duration_seconds}}`;
- `protocol/src/models.rs`: an output is a string or a list of content items
  (`{type: input_text, text}`); a single text item is written as a plain string;
- code mode (`core/src/tools/code_mode/mod.rs`): the freeform `exec` tool's input is
  JavaScript whose `await tools.exec_command({cmd: ...})` calls run the commands; its
  output starts `Script completed|Script failed|Script running with cell ID N|Script
  terminated`, `Wall time N seconds`, `Output:`; a nested exec_command returns
  `{chunk_id, wall_time_seconds, exit_code, session_id, output}` to the script;
- apply_patch's patch grammar (`*** Begin Patch`, `*** Add File: P` with `+` lines,
  `*** Update File: P` with `@@` hunks, `*** Move to: P`, `*** Delete File: P`);
- `core/src/context/user_shell_command.rs`: a command the user ran with `!` comes back as
  `<user_shell_command><command>CMD</command><result>Exit code: N / Duration: ... /
  Output: ...</result></user_shell_command>` on the user's side.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import regex

from analyzer.core import bounded_json

HEADER_LINE = regex.compile(
    r"^(?:Chunk ID: \S*|Wall time:? [\d.]+ seconds|Process exited with code (?P<exit>-?\d+)"
    r"|Process running with session ID (?P<session>\S+)|Original token count: \d+"
    r"|Exit code: (?P<code>-?\d+|none.*)|Total output lines: \d+|Duration: [\d.]+ seconds"
    r"|Script (?:completed|failed|terminated|running with cell ID (?P<cell>\S+)))$"
)
MAX_HEADER_LINES = 8
EXEC_CALL = regex.compile(r"\btools\s*(?:\.\s*exec_command|\[\s*[\"']exec_command[\"']\s*\])\s*\(")
CMD_KEY = regex.compile(r"(?:^|[{,\s])[\"']?cmd[\"']?\s*:\s*")
NAME = regex.compile(r"[A-Za-z_$][\w$]*")
USER_SHELL = regex.compile(
    r"^\s*<user_shell_command>\s*<command>\n?(?P<command>.*?)\n?</command>\s*"
    r"<result>\n?(?P<result>.*?)\n?</result>\s*</user_shell_command>\s*$",
    regex.S,
)


@dataclass(frozen=True)
class ToolOutput:
    """A tool's output: the text the tool printed, and what the header said of it."""

    text: str
    exit_code: int | None = None
    session_id: str | None = None  # the process still runs; write_stdin reads on


def output_text(raw: Any) -> str:
    """The text of an output in any of its serialized forms."""
    if isinstance(raw, dict):
        raw = raw.get("content", raw.get("output", ""))
    if isinstance(raw, list):
        text = ""
        for item in raw:
            part = item.get("text") if isinstance(item, dict) else item
            if isinstance(part, str):
                text += part if not text or text.endswith("\n") else "\n" + part
        return text
    return raw if isinstance(raw, str) else ""


def parse_output(raw: Any) -> ToolOutput:
    """(output, exit code, running session) from any output form Codex writes."""
    text = output_text(raw)
    stripped = text.lstrip()
    if stripped.startswith("{"):
        try:
            value = bounded_json.loads(stripped)
        except ValueError:
            value = None
        if isinstance(value, dict) and "output" in value:
            return _json_output(value)
    return _headed(text)


def _json_output(value: dict[str, Any]) -> ToolOutput:
    metadata = value.get("metadata") if isinstance(value.get("metadata"), dict) else {}
    code = metadata.get("exit_code", value.get("exit_code"))
    session = value.get("session_id")
    return ToolOutput(
        str(value.get("output") or ""),
        code if isinstance(code, int) and not isinstance(code, bool) else None,
        str(session) if session is not None else None,
    )


def _headed(text: str) -> ToolOutput:
    """Text under a header of known lines ending in `Output:`; else the text as it is."""
    lines = text.split("\n")
    exit_code = session = None
    for index, line in enumerate(lines[: MAX_HEADER_LINES + 1]):
        if line.strip() == "Output:":
            body = "\n".join(lines[index + 1 :])
            return ToolOutput(body, exit_code, session)
        found = HEADER_LINE.match(line.strip())
        if found is None:
            break
        code = found["exit"] or found["code"]
        if code and code.lstrip("-").isdigit():
            exit_code = int(code)
        session = found["session"] or session
    return ToolOutput(text)


def cell_output(raw: Any) -> ToolOutput:
    """A code-mode cell's output, its header stripped; a nested exec_command result the
    script passed on (`text(JSON.stringify(r))`) is read as that command's output."""
    body = _headed(output_text(raw)).text
    if body.strip().startswith("{"):
        try:
            value = bounded_json.loads(body.strip())
        except ValueError:
            value = None
        if isinstance(value, dict) and "output" in value:
            return _json_output(value)
    return ToolOutput(body)


def user_shell_command(text: str) -> tuple[str, ToolOutput] | None:
    """A `<user_shell_command>` fragment: the command the user ran, and its result."""
    found = USER_SHELL.match(text)
    if found is None:
        return None
    return found["command"], _headed(found["result"])


# --------------------------------------------------------------------------- code mode


def exec_commands(source: str) -> list[str]:
    """The `cmd` of each `tools.exec_command(...)` call in a code-mode cell, in order."""
    commands = []
    for call in EXEC_CALL.finditer(source):
        window = source[call.end() : call.end() + 4000]
        key = CMD_KEY.search(window)
        if key is None:
            continue
        value = _js_value(source, call.end() + key.end())
        if value:
            commands.append(value)
    return commands


def _js_value(source: str, at: int) -> str | None:
    """A string literal at `at`, or a name bound to one by an earlier const/let/var."""
    if at < len(source) and source[at] in "\"'`":
        return js_string(source, at)
    name = NAME.match(source, at)
    if name is None:
        return None
    binding = regex.search(
        rf"(?:const|let|var)\s+{regex.escape(name[0])}\s*=\s*(?=[\"'`])", source[:at]
    )
    return js_string(source, binding.end()) if binding else None


ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "b": "\b", "f": "\f", "v": "\v", "0": "\0"}


def js_string(source: str, at: int) -> str | None:
    """Decode the JavaScript string literal opening at `at` (None for an interpolated one)."""
    quote = source[at]
    out: list[str] = []
    index = at + 1
    while index < len(source):
        char = source[index]
        if char == quote:
            return "".join(out)
        if quote == "`" and source.startswith("${", index):
            return None
        if char == "\n" and quote != "`":
            return None
        if char == "\\" and index + 1 < len(source):
            nxt = source[index + 1]
            if nxt == "u" and source[index + 2 : index + 3] == "{":
                end = source.find("}", index)
                out.append(chr(int(source[index + 3 : end], 16)))
                index = end + 1
                continue
            if nxt in "ux":
                width = 4 if nxt == "u" else 2
                digits = source[index + 2 : index + 2 + width]
                try:
                    out.append(chr(int(digits, 16)))
                except ValueError:
                    return None
                index += 2 + width
                continue
            if nxt != "\n":
                out.append(ESCAPES.get(nxt, nxt))
            index += 2
            continue
        out.append(char)
        index += 1
    return None


# --------------------------------------------------------------------------- apply_patch


def patch_writes(patch: str, known: dict[str, str]) -> list[tuple[str, str]]:
    """(path, content after the patch) of each file the patch adds or updates.

    An update is applied to the content `known` holds for that path (earlier writes);
    when it cannot be, the lines the hunks add stand for the file (enough to find a
    launch line in a script)."""
    writes: list[tuple[str, str]] = []
    path: str | None = None
    mode = ""
    body: list[str] = []

    def flush() -> None:
        if path is None or mode == "delete":
            return
        if mode == "add":
            content = "\n".join(line[1:] for line in body if line.startswith("+")) + "\n"
        else:
            content = _apply_update(known.get(path), body)
        known[path] = content
        writes.append((path, content))

    for line in patch.split("\n"):
        header = regex.match(r"^\*\*\* (Add|Update|Delete) File: (.+?)\s*$", line)
        if header:
            flush()
            mode, path, body = header[1].lower(), header[2], []
        elif line.startswith("*** Move to: ") and path is not None:
            path = line[len("*** Move to: ") :].strip()
        elif line.startswith("*** End Patch"):
            flush()
            path = None
        elif path is not None:
            body.append(line)
    flush()
    return writes


def _apply_update(before: str | None, body: list[str]) -> str:
    hunks: list[list[str]] = [[]]
    for line in body:
        if line.startswith("@@"):
            hunks.append([])
        elif line[:1] in (" ", "+", "-") or line == "":
            hunks[-1].append(line if line else " ")
    added = [line[1:] for hunk in hunks for line in hunk if line.startswith("+")]
    if before is None:
        return "\n".join(added) + "\n"
    lines = before.split("\n")
    for hunk in hunks:
        old = [line[1:] for line in hunk if line[:1] in (" ", "-")]
        new = [line[1:] for line in hunk if line[:1] in (" ", "+")]
        if not old:
            lines.extend(new)
            continue
        at = next(
            (i for i in range(len(lines) - len(old) + 1) if lines[i : i + len(old)] == old), None
        )
        if at is None:
            return "\n".join([*lines, *added]) + "\n"
        lines[at : at + len(old)] = new
    return "\n".join(lines)

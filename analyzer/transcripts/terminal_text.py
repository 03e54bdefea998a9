"""Plain terminal text: a pasted shell session or the typescript `script` writes.

A command starts at a prompt line (`$ `, `# `, `user@host:~$ `, `[user@host dir]$ `,
`(venv) ...`); it continues over `\\` line ends, open quotes and heredoc bodies; its output
runs to the next prompt. Colour codes, carriage-return redraws and backspaces that
`script` records are resolved to what the terminal showed. Exit codes are not printed
in such text, so they are unknown. Line numbers are the file's, so evidence points at
the exact line of the paste.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Iterator
from typing import IO, TYPE_CHECKING

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.sglang.log_format import ANSI

if TYPE_CHECKING:  # a log's transcript sniffing needs no transcript model
    from pathlib import Path

    from analyzer.transcripts.events import ShellCall, Transcript

PROMPT = re.compile(
    r"""^(?:\([^()\s]+\)\s+)?                                   # (venv) / (base)
    (?:
        (?P<full>\[[^\]\n]*\]\s?[$#%]\s                          # [user@host dir]$
          | [\w.-]+@[\w.-]+(?::[^\s]*|\s[~/][^\s]*)?\s?[$#%]\s   # user@host:~$
          | [\w.]+-\d[\d.]*[$#]\s)                               # bash-5.1$
      | (?P<bare>(?:[~/][^\s$#]*\s?)?[$#%\u276f]\s)              # $ / # / ~/dir $
    )""",
    re.X,
)
SCRIPT_HEADER = re.compile(r"^Script started on (?P<when>\S+(?: \S+)?)")
SCRIPT_FOOTER = LazyPattern(r"^Script done on ")
HEREDOC = LazyPattern(r"<<-?\s*(?P<q>['\"]?)(?P<word>[A-Za-z_][\w]*)(?P=q)")
PS2 = LazyPattern(r"^>\s?")
# First words a bare `# ` prompt may start with; anything else after `# ` is a comment.
COMMANDS = frozenset(
    {
        "ssh", "ls", "ll", "cat", "tail", "head", "less", "more", "grep", "egrep", "rg", "nvidia-smi",
        "pgrep", "pkill", "ps", "kill", "killall", "curl", "wget", "python", "python3", "nohup",
        "bash", "sh", "cd", "export", "source", "env", "echo", "mkdir", "rm", "cp", "mv", "tmux",
        "screen", "docker", "sudo", "sglang", "pip", "pip3", "uv", "conda", "watch", "journalctl",
        "dmesg", "free", "df", "du", "top", "htop", "sleep", "timeout", "which", "CUDA_VISIBLE_DEVICES",
        "ss", "netstat", "lsof", "fuser", "tee", "awk", "sed", "git", "sbatch", "srun", "squeue",
        "scancel", "kubectl", "date", "uptime", "hostname", "nproc", "systemctl", "set",
    }
)  # fmt: skip
MAX_OUTPUT_LINES = 20_000
HEAD_LINES = 5_000


def prompt_command(line: str) -> str | None:
    """The command typed after a prompt on this line, or None if it is not a prompt line."""
    found = PROMPT.match(line)
    if not found:
        return None
    command = line[found.end() :].strip()
    if found["bare"] is not None and not _looks_like_command(command, found["bare"]):
        return None
    return command


def _looks_like_command(command: str, prompt: str) -> bool:
    """Bare prompts are ambiguous (`# ` is also a comment, `$ ` a price): check the word."""
    if not command:
        return True
    first = command.split(None, 1)[0]
    if "=" in first or "/" in first or first.startswith("./"):
        return True
    if prompt.strip() == "#":
        return first in COMMANDS
    return bool(re.fullmatch(r"[A-Za-z_][\w.+-]*", first))


def visible(raw: str) -> str:
    """What a terminal showed for a recorded line: colours dropped, CR redraws and
    backspaces applied."""
    text = ANSI.sub("", raw) if "\x1b" in raw else raw
    if "\r" in text:
        text = text.rstrip("\r").rsplit("\r", 1)[-1]
    if "\b" in text:
        kept: list[str] = []
        for char in text:
            if char == "\b":
                if kept:
                    kept.pop()
            else:
                kept.append(char)
        text = "".join(kept)
    return text


def _open_quote(text: str) -> bool:
    """True when the text ends inside a quote (the command continues on the next line)."""
    quote, escaped = "", False
    for char in text:
        if escaped:
            escaped = False
        elif char == "\\" and quote != "'":
            escaped = True
        elif quote:
            if char == quote:
                quote = ""
        elif char in "'\"":
            quote = char
    return bool(quote)


class _Call:
    """A command being read, and its output so far (head kept, middle dropped, tail kept)."""

    def __init__(self, command: str, line: int) -> None:
        self.command_lines = [command]
        self.line = line
        self.output_line: int | None = None
        self.head: list[str] = []
        self.tail: deque[str] = deque(maxlen=MAX_OUTPUT_LINES - HEAD_LINES)
        self.seen = 0
        self.heredoc: str | None = None
        self.continuing = True
        self._update_continuation()

    @property
    def command(self) -> str:
        return "\n".join(self.command_lines)

    def _update_continuation(self) -> None:
        text = self.command
        last = self.command_lines[-1]
        if self.heredoc is None:
            found = list(HEREDOC.finditer(last))
            if found:
                self.heredoc = found[-1]["word"]
                return
        self.continuing = last.endswith("\\") or _open_quote(text)

    def add_command_line(self, line: str) -> None:
        line = PS2.sub("", line, count=1)
        self.command_lines.append(line)
        if self.heredoc is not None:
            if line.strip() == self.heredoc:
                self.heredoc = None
                self.continuing = False
            return
        self._update_continuation()

    def add_output(self, text: str, number: int) -> None:
        if self.output_line is None:
            self.output_line = number
        self.seen += 1
        if len(self.head) < HEAD_LINES:
            self.head.append(text)
        else:
            self.tail.append(text)

    def build(self) -> ShellCall:
        from analyzer.transcripts.events import ShellCall

        kept = len(self.head) + len(self.tail)
        omitted = (len(self.head), self.seen - kept) if self.seen > kept else None
        return ShellCall(
            command=self.command,
            output="\n".join([*self.head, *self.tail]),
            command_line=self.line,
            output_line=self.output_line if self.output_line is not None else self.line + 1,
            omitted=omitted,
        )


def read_terminal_text(
    stream: IO[bytes], transcript: Transcript, path: Path | None = None
) -> Iterator[ShellCall]:
    """Yield each command of a terminal session with its output, in order (`path`: unused)."""
    call: _Call | None = None
    number = 0
    for raw in stream:
        number += 1
        line = visible(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
        if number == 1 and SCRIPT_HEADER.match(line):
            transcript.notes.append(f"`script` typescript ({line.strip()})")
            continue
        if call is not None and call.continuing:
            call.add_command_line(line)
            continue
        if SCRIPT_FOOTER.match(line):
            continue
        command = prompt_command(line)
        if command is not None:
            if call is not None:
                yield call.build()
            call = _Call(command, number) if command else None
            continue
        if call is not None:
            call.add_output(line, number)
    transcript.lines = number
    if call is not None:
        yield call.build()

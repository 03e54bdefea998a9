"""How the shell reads a command the session ran: simple commands, levels, heredocs.

A session command is often several commands in one (`ls x; echo ---; pgrep -a python3`),
runs others on a remote host (`ssh host '...'`) or through `bash -c '...'`, and writes
scripts with heredocs. This module splits such text the way bash would, into simple
commands with their redirections, and opens each `ssh` / `bash -c` string as a level of
its own, as the remote or inner shell will read it. It also records what a shell would
do that the author did not mean: a quote that never closes, or words left outside a
`bash -c` string (they become $0, $1, ... and are silently ignored).

analyzer/sglang/launch_command.py models one launch for byte-exact edits; this module only needs the
structure of whole session commands, heredocs included, which that lexer does not read.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import regex

from analyzer.core.shell_words import ShellLexer, Token, shell_script_index, ssh_host_index

DUPLICATION = regex.compile(r"\d*[<>]&(?:\d+|-)")
STDOUT = regex.compile(r"(?:1?(?:>>|>\||>)|&>>|&>)")
STDERR = regex.compile(r"2(?:>>|>\||>)")
ASSIGNMENT = regex.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
RESERVED = frozenset({"do", "then", "else", "elif", "{", "!", "time", "(", "while", "until", "if"})
# Wrappers and how many option values they take before the wrapped command.
WRAPPERS = frozenset(
    {"nohup", "env", "sudo", "setsid", "exec", "nice", "ionice", "stdbuf", "taskset", "numactl",
     "timeout", "time", "chrt", "unbuffer", "caffeinate"}
)  # fmt: skip
VALUE_OPTIONS = {
    "sudo": frozenset({"-u", "-g", "-C", "-D", "-h", "-p", "-U"}),
    "nice": frozenset({"-n"}),
    "timeout": frozenset({"-s", "-k", "--signal", "--kill-after"}),
    "taskset": frozenset(),
    "env": frozenset({"-u", "-C", "-S"}),
}
LAUNCH_HINT = regex.compile(r"sglang(?:_router)?\.launch_server|\bsglang\b")


@dataclass
class Word:
    """A word's value after quote removal, its span in the level's text, the quotes used."""

    value: str
    start: int
    end: int
    quotes: str = ""


@dataclass
class Command:
    """A simple command: words, redirections `(operator, target)`, the operator after it."""

    words: list[Word] = field(default_factory=list)
    redirects: list[tuple[str, str]] = field(default_factory=list)
    term: str | None = None
    heredoc: str | None = None
    statement: int = 0
    child: Level | None = None
    leftover: list[Word] = field(default_factory=list)

    @property
    def values(self) -> list[str]:
        return [w.value for w in self.words]


@dataclass
class Problem:
    """Something the shell did with the text that its author did not mean."""

    kind: str  # unterminated_quote | outside_script
    detail: str
    level: Level
    span: tuple[int, int]


@dataclass
class Level:
    """One shell's reading: the top command, or a string an `ssh` / `bash -c` runs."""

    text: str
    via: str = ""
    commands: list[Command] = field(default_factory=list)
    statements: list[tuple[int, int]] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    parent: Level | None = None
    opener: Command | None = None

    def walk(self) -> Iterator[tuple[Command, Level]]:
        """Every simple command, inner levels right after the command that opens them."""
        for command in self.commands:
            yield command, self
            if command.child is not None:
                yield from command.child.walk()

    def all_problems(self) -> list[Problem]:
        found = list(self.problems)
        for command in self.commands:
            if command.child is not None:
                found.extend(command.child.all_problems())
        return found

    def pipeline(self, command: Command) -> list[Command]:
        """The command and those it pipes into."""
        index = self.commands.index(command)
        members = [command]
        while members[-1].term in ("|", "|&") and index + 1 < len(self.commands):
            index += 1
            members.append(self.commands[index])
        return members

    def statement_text(self, command: Command) -> str:
        start, end = self.statements[command.statement]
        return self.text[start:end]


MAX_DEPTH = 6


def parse(
    text: str,
    via: str = "",
    parent: Level | None = None,
    depth: int = 0,
    opener: Command | None = None,
) -> Level:
    """Read `text` as a shell would, opening `ssh` and `bash -c` strings as inner levels."""
    level = Level(text, via, parent=parent, opener=opener)
    tokens = _tokens(text, level)
    level.commands, level.statements = _commands(tokens)
    if depth < MAX_DEPTH:
        for command in level.commands:
            _open_inner(command, level, depth)
    return level


def head(command: Command) -> int | None:
    """Index of the word that names the program, past assignments, keywords and wrappers."""
    words = command.values
    i = 0
    while i < len(words):
        word = words[i]
        base = basename(word)
        if ASSIGNMENT.match(word) or word in RESERVED:
            i += 1
        elif base in WRAPPERS:
            i = _skip_wrapper_options(words, i, base)
        else:
            return i
    return None


def program(command: Command) -> str | None:
    """The basename of the program a command runs (`python3`, `tail`, `nvidia-smi`)."""
    index = head(command)
    return basename(command.words[index].value) if index is not None else None


def basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def output_file(level: Level, command: Command) -> str | None:
    """Where the command's output goes: `> f`, `&> f`, `| tee f`, else `2> f`."""
    stdout = stderr = None
    for operator, target in command.redirects:
        if not target:
            continue
        if STDOUT.fullmatch(operator):
            stdout = target
        elif STDERR.fullmatch(operator):
            stderr = target
    if stdout:
        return stdout
    for member in level.pipeline(command)[1:]:
        if program(member) == "tee":
            files = [w for w in member.values[1:] if not w.startswith("-")]
            if files:
                return files[0]
    return stderr


def backgrounded(level: Level, command: Command) -> bool:
    return level.pipeline(command)[-1].term == "&"


def _skip_wrapper_options(words: list[str], i: int, base: str) -> int:
    """Index after the wrapper and its options (and timeout's duration)."""
    takes = VALUE_OPTIONS.get(base, frozenset())
    i += 1
    while i < len(words) and words[i].startswith("-") and words[i] != "-":
        i += 2 if words[i] in takes else 1
    if base == "timeout" and i < len(words):
        i += 1
    if base == "taskset" and i < len(words):
        i += 1
    return i


def _open_inner(command: Command, level: Level, depth: int) -> None:
    index = head(command)
    if index is None:
        return
    words = command.words
    base = basename(words[index].value)
    if base in SHELLS:
        script = shell_script_index(command.values, index)
        if script is None:
            return
        command.child = parse(words[script].value, "bash -c", level, depth + 1, command)
        command.leftover = words[script + 1 :]
        lost = " ".join(w.value for w in command.leftover)
        if command.leftover and (LAUNCH_HINT.search(lost) or regex.search(r"(?:^|\s)--\w", lost)):
            detail = (
                f"`{base} -c` ran only `{words[script].value}`; the words after it "
                f"(`{_short(lost)}`) became its positional parameters $0, $1, ... and were ignored"
            )
            level.problems.append(
                Problem("outside_script", detail, level, (words[script].start, words[-1].end))
            )
    elif base == "ssh":
        host = ssh_host_index(command.values, index)
        remote = words[host + 1 :]
        if host < len(words) and remote:
            script = " ".join(w.value for w in remote)
            command.child = parse(script, f"ssh {words[host].value}", level, depth + 1, command)


def _short(text: str, limit: int = 60) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


# --------------------------------------------------------------------------- tokens


def _tokens(text: str, level: Level) -> list[Token]:
    """The shared lexer's tokens, heredocs read, unclosed quotes noted as the level's problems."""

    def unterminated(at: int) -> None:
        quote = text[at]
        detail = f"the {quote} opened here never closes: the shell waits for more input or fails"
        level.problems.append(Problem("unterminated_quote", detail, level, (at, at + 1)))

    return ShellLexer(text, heredocs=True, on_unterminated=unterminated).run()


def _commands(tokens: list[Token]) -> tuple[list[Command], list[tuple[int, int]]]:
    """Group tokens into simple commands and newline-separated statements."""
    commands: list[Command] = []
    spans: list[list[int]] = [[-1, -1]]
    current = Command()
    pending: str | None = None
    heredoc_owners: list[Command] = []
    statement = 0
    for token in tokens:
        if token.kind == "heredoc":
            if heredoc_owners:
                heredoc_owners.pop(0).heredoc = token.value
            continue
        if token.value != "\n":
            span = spans[statement]
            span[0] = token.start if span[0] < 0 else span[0]
            span[1] = token.end
        if token.kind == "word":
            if pending is not None:
                current.redirects.append((pending, token.value))
                if pending.endswith(("<<", "<<-")):
                    heredoc_owners.append(current)
                pending = None
            else:
                current.words.append(Word(token.value, token.start, token.end, token.quotes))
        elif "<" in token.value or ">" in token.value:
            if DUPLICATION.fullmatch(token.value):
                current.redirects.append((token.value, ""))
            else:
                pending = token.value
        elif token.value in ("(", ")"):
            continue
        else:
            current.term, pending = token.value, None
            current.statement = statement
            commands.append(current)
            current = Command()
            if token.value == "\n":
                statement += 1
                spans.append([-1, -1])
    current.statement = statement
    commands.append(current)
    kept = [c for c in commands if c.words or c.redirects]
    statements = [(s, e) if s >= 0 else (0, 0) for s, e in spans]
    return kept, statements


def outward(level: Level, command: Command) -> Iterator[tuple[Level, Command]]:
    """The command, then each command that opened an enclosing level, innermost first."""
    current: tuple[Level, Command] | None = (level, command)
    while current is not None:
        yield current
        outer_level, outer_command = current
        if outer_level.parent is None or outer_level.opener is None:
            current = None
        else:
            current = (outer_level.parent, outer_level.opener)

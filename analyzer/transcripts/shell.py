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

Then how one session command reads: is it SGLang's entry point, which interpreter, where its
log goes, what part of a compound command's output each command printed.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Iterator
from dataclasses import dataclass, field
from fnmatch import fnmatch

import regex

from analyzer.core.shell_words import ShellLexer, Token, shell_script_index, ssh_host_index
from analyzer.transcripts.command_outputs import NumberedLine
from analyzer.transcripts.events import ShellCall

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
LOOPS = frozenset({"for", "while", "until"})
ENTRY_MODULES = frozenset({"sglang.launch_server", "sglang_router.launch_server"})
PYTHON = regex.compile(r"python(?:\d+(?:\.\d+)*)?")
HELP_FLAGS = frozenset({"--help", "-h", "--version"})
MARKER_TEXT = regex.compile(r"^[-=#*_~+. ]*[\w .:/()\[\]-]{0,60}[-=#*_~+. ]*$")
# Programs that run a command in a container, a pod or a job (`docker run ... IMAGE python3
# -m sglang.launch_server`): the entry point follows their options and arguments at no fixed
# place. Their `logs` subcommand shows the launched server's output.
RUNNERS = frozenset(
    {"docker", "podman", "nerdctl", "kubectl", "apptainer", "singularity", "enroot", "srun",
     "mpirun"}
)  # fmt: skip


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


def command_ref(ref: str | None) -> str | None:
    """Refs name a record's output; its command (or a script's text) is `REF:command`."""
    return f"{ref}:command" if ref else None


def subtree(top: Command, level: Level):
    yield top, level
    if top.child is not None:
        yield from top.child.walk()


def is_entry(words: list[str]) -> bool:
    """`python[3] [opts] -m sglang.launch_server`, `sglang serve`, also after `uv run` etc.,
    anywhere after a container or job runner."""
    if words and basename(words[0]) in RUNNERS:
        return any(_entry_starts(words[i:]) for i in range(1, len(words)))
    return _entry_starts(words)


def is_runner_logs(words: list[str]) -> bool:
    """`docker logs [-f] NAME`, `kubectl logs POD`: the output of what a runner launched."""
    return len(words) > 1 and basename(words[0]) in RUNNERS and words[1] == "logs"


def _entry_starts(words: list[str]) -> bool:
    for i, word in enumerate(words[:6]):
        base = basename(word)
        if base == "sglang" and i + 1 < len(words) and words[i + 1] == "serve":
            return True
        if PYTHON.fullmatch(base):
            rest = words[i + 1 : i + 5]
            return (
                "-m" in rest
                and rest.index("-m") + 1 < len(rest)
                and (rest[rest.index("-m") + 1] in ENTRY_MODULES)
            )
    return False


def is_entry_command(command: Command) -> bool:
    index = head(command)
    if index is not None and is_entry(command.values[index:]):
        return True
    if command.leftover and any(m in w.value for w in command.leftover for m in ENTRY_MODULES):
        return True
    return command.child is not None and any(
        is_entry_command(inner) for inner, _ in command.child.walk()
    )


def interpreter_of(command: Command) -> str | None:
    index = head(command)
    if index is None:
        return None
    words = command.values[index:]
    for word in words[:6]:
        if PYTHON.fullmatch(basename(word)) or basename(word) == "sglang":
            return word
    return words[0] if words else None


def log_path_of(where: Level, command: Command) -> str | None:
    """The innermost redirection of the launch's output, made absolute by a preceding cd."""
    for level, outer in outward(where, command):
        target = output_file(level, outer)
        if target:
            return absolute_path(target, where, command)
    return None


def absolute_path(path: str, where: Level, command: Command) -> str:
    if path.startswith(("/", "~", "$")):
        return path
    for level, outer in outward(where, command):
        position = level.commands.index(outer)
        for earlier in reversed(level.commands[:position]):
            if program(earlier) == "cd" and len(earlier.values) > 1:
                folder = earlier.values[1]
                if folder.startswith("/"):
                    return os.path.normpath(f"{folder}/{path}")
    return path


def same_file(word: str, log: str) -> bool:
    if word == log or fnmatch(log, word):
        return True
    if not word.startswith("/") or not log.startswith("/"):
        return basename(word) == basename(log) or fnmatch(basename(log), basename(word))
    return False


def kills_server(words: list[str]) -> bool:
    target = " ".join(words[1:])
    return bool(regex.search(r"sglang|launch_server|python|\$\(|\d{2,}", target))


def statement_lines(call: ShellCall, level: Level, top: Command) -> list[NumberedLine]:
    start, end = level.statements[top.statement]
    first = call.command.count("\n", 0, start)
    wanted = range(first, first + level.text.count("\n", start, end) + 1)
    return [(n, t) for k, (n, t) in enumerate(call.command_lines()) if k in wanted]


def balanced(text: str) -> bool:
    try:
        shlex.split(text)
    except ValueError:
        return False
    return True


def strip_grep_prefix(line: str, arguments: list[str], paths: list[str]) -> str:
    """`grep -n` prints `123:`; several files print `path:` first."""
    for path in paths:
        if line.startswith(path + ":") or line.startswith(path + "-"):
            line = line[len(path) + 1 :]
            break
    if any(a.startswith("-") and not a.startswith("--") and "n" in a for a in arguments):
        found = regex.match(r"^\d+[:-]", line)
        if found:
            return line[found.end() :]
    return line


def output_sections(
    level: Level, lines: list[NumberedLine]
) -> list[tuple[list[list[tuple[Command, Level]]], list[NumberedLine]]]:
    """Split a call's output into the parts each group of commands printed.

    Groups are separated by `echo MARKER` commands whose MARKER line appears in the output;
    without markers the whole output is one section.
    """
    pipelines = simple_pipelines(level)
    sections: list[tuple[list[list[tuple[Command, Level]]], list[NumberedLine]]] = []
    group: list[list[tuple[Command, Level]]] = []
    position = 0
    loops = 0
    previous_term: str | None = ";"
    for pipeline in pipelines:
        first = pipeline[0][0]
        loops += program(first) in LOOPS
        loops -= sum(c.values.count("done") for c, _ in pipeline)
        standalone = loops <= 0 and previous_term in (";", "\n", None)
        previous_term = pipeline[-1][0].term
        marker = echo_marker(pipeline) if standalone else None
        if marker is None:
            group.append(pipeline)
            continue
        found = next(
            (k for k in range(position, len(lines)) if lines[k][1].strip() == marker), None
        )
        if found is None:
            continue
        sections.append((group, lines[position:found]))
        group, position = [], found + 1
    sections.append((group, lines[position:]))
    return [(g, ls) for g, ls in sections if g]


def simple_pipelines(level: Level) -> list[list[tuple[Command, Level]]]:
    """Leaf commands (ssh/bash -c openers replaced by what they run), grouped by pipes."""
    leaves = [
        (c, lv)
        for c, lv in level.walk()
        if c.child is None or any(m in w.value for w in c.leftover for m in ENTRY_MODULES)
    ]
    pipelines: list[list[tuple[Command, Level]]] = []
    for command, where in leaves:
        if pipelines and pipelines[-1][-1][0].term in ("|", "|&") and pipelines[-1][-1][1] is where:
            pipelines[-1].append((command, where))
        else:
            pipelines.append([(command, where)])
    return pipelines


def echo_marker(pipeline: list[tuple[Command, Level]]) -> str | None:
    if len(pipeline) != 1:
        return None
    command = pipeline[0][0]
    if program(command) not in ("echo", "printf") or command.redirects:
        return None
    words = [w for w in command.values[1:] if w not in ("-e", "-n", "-E")]
    text = " ".join(words).replace("\\n", "").strip()
    if not text or "$" in text or not MARKER_TEXT.fullmatch(text):
        return None
    return text

"""How one session command reads: is it SGLang's entry point, which interpreter, where its
log goes, what part of a compound command's output each command printed."""

from __future__ import annotations

import os
import shlex
from fnmatch import fnmatch

import regex

from analyzer.transcripts import shell
from analyzer.transcripts.command_outputs import NumberedLine
from analyzer.transcripts.events import ShellCall

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


def command_ref(ref: str | None) -> str | None:
    """Refs name a record's output; its command (or a script's text) is `REF:command`."""
    return f"{ref}:command" if ref else None


def subtree(top: shell.Command, level: shell.Level):
    yield top, level
    if top.child is not None:
        yield from top.child.walk()


def is_entry(words: list[str]) -> bool:
    """`python[3] [opts] -m sglang.launch_server`, `sglang serve`, also after `uv run` etc.,
    anywhere after a container or job runner."""
    if words and shell.basename(words[0]) in RUNNERS:
        return any(_entry_starts(words[i:]) for i in range(1, len(words)))
    return _entry_starts(words)


def is_runner_logs(words: list[str]) -> bool:
    """`docker logs [-f] NAME`, `kubectl logs POD`: the output of what a runner launched."""
    return len(words) > 1 and shell.basename(words[0]) in RUNNERS and words[1] == "logs"


def _entry_starts(words: list[str]) -> bool:
    for i, word in enumerate(words[:6]):
        base = shell.basename(word)
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


def is_entry_command(command: shell.Command) -> bool:
    index = shell.head(command)
    if index is not None and is_entry(command.values[index:]):
        return True
    if command.leftover and any(m in w.value for w in command.leftover for m in ENTRY_MODULES):
        return True
    return command.child is not None and any(
        is_entry_command(inner) for inner, _ in command.child.walk()
    )


def interpreter_of(command: shell.Command) -> str | None:
    index = shell.head(command)
    if index is None:
        return None
    words = command.values[index:]
    for word in words[:6]:
        if PYTHON.fullmatch(shell.basename(word)) or shell.basename(word) == "sglang":
            return word
    return words[0] if words else None


def log_path_of(where: shell.Level, command: shell.Command) -> str | None:
    """The innermost redirection of the launch's output, made absolute by a preceding cd."""
    for level, outer in shell.outward(where, command):
        target = shell.output_file(level, outer)
        if target:
            return absolute_path(target, where, command)
    return None


def absolute_path(path: str, where: shell.Level, command: shell.Command) -> str:
    if path.startswith(("/", "~", "$")):
        return path
    for level, outer in shell.outward(where, command):
        position = level.commands.index(outer)
        for earlier in reversed(level.commands[:position]):
            if shell.program(earlier) == "cd" and len(earlier.values) > 1:
                folder = earlier.values[1]
                if folder.startswith("/"):
                    return os.path.normpath(f"{folder}/{path}")
    return path


def same_file(word: str, log: str) -> bool:
    if word == log or fnmatch(log, word):
        return True
    if not word.startswith("/") or not log.startswith("/"):
        return shell.basename(word) == shell.basename(log) or fnmatch(
            shell.basename(log), shell.basename(word)
        )
    return False


def kills_server(words: list[str]) -> bool:
    target = " ".join(words[1:])
    return bool(regex.search(r"sglang|launch_server|python|\$\(|\d{2,}", target))


def statement_lines(call: ShellCall, level: shell.Level, top: shell.Command) -> list[NumberedLine]:
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
    level: shell.Level, lines: list[NumberedLine]
) -> list[tuple[list[list[tuple[shell.Command, shell.Level]]], list[NumberedLine]]]:
    """Split a call's output into the parts each group of commands printed.

    Groups are separated by `echo MARKER` commands whose MARKER line appears in the output;
    without markers the whole output is one section.
    """
    pipelines = simple_pipelines(level)
    sections: list[tuple[list[list[tuple[shell.Command, shell.Level]]], list[NumberedLine]]] = []
    group: list[list[tuple[shell.Command, shell.Level]]] = []
    position = 0
    loops = 0
    previous_term: str | None = ";"
    for pipeline in pipelines:
        first = pipeline[0][0]
        loops += shell.program(first) in LOOPS
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


def simple_pipelines(level: shell.Level) -> list[list[tuple[shell.Command, shell.Level]]]:
    """Leaf commands (ssh/bash -c openers replaced by what they run), grouped by pipes."""
    leaves = [
        (c, lv)
        for c, lv in level.walk()
        if c.child is None or any(m in w.value for w in c.leftover for m in ENTRY_MODULES)
    ]
    pipelines: list[list[tuple[shell.Command, shell.Level]]] = []
    for command, where in leaves:
        if pipelines and pipelines[-1][-1][0].term in ("|", "|&") and pipelines[-1][-1][1] is where:
            pipelines[-1].append((command, where))
        else:
            pipelines.append([(command, where)])
    return pipelines


def echo_marker(pipeline: list[tuple[shell.Command, shell.Level]]) -> str | None:
    if len(pipeline) != 1:
        return None
    command = pipeline[0][0]
    if shell.program(command) not in ("echo", "printf") or command.redirects:
        return None
    words = [w for w in command.values[1:] if w not in ("-e", "-n", "-E")]
    text = " ".join(words).replace("\\n", "").strip()
    if not text or "$" in text or not MARKER_TEXT.fullmatch(text):
        return None
    return text

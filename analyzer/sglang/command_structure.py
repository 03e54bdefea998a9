"""How a launch command sits in its shell text: simple commands, levels, the SGLang entry point
and its arguments.

A string handed to `bash -c` or `ssh` is lexed again as its own level (with the one shell
lexer, analyzer/core/shell_words.py); the launch is the innermost simple command that runs
SGLang's entry point, and its arguments are read as argparse will. analyzer/sglang/
launch_command.py builds the model on this; analyzer/sglang/command_edits.py splices edits
into it.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import lru_cache

from analyzer.core.shell_words import ShellLexer, Token, shell_script_index, ssh_host_index

TakesValue = Callable[[str], bool | None]
Canonical = Callable[[str], str | None]

_MODULES = frozenset({"sglang.launch_server", "sglang_router.launch_server"})
_PYTHON = re.compile(r"python(?:\d+(?:\.\d+)*)?")
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
_WRAPPERS = frozenset(
    {
        "env", "nohup", "exec", "timeout", "numactl", "taskset", "nice", "ionice", "stdbuf",
        "setsid", "sudo", "time", "chrt", "unbuffer", "srun", "mpirun", "docker", "podman",
        "kubectl", "apptainer", "singularity", "uv", "conda", "mamba", "micromamba", "pixi",
        "poetry",
    }
)  # fmt: skip
# Commands that mention a launch without running it; met after a wrapper they end the search.
_NOT_LAUNCHERS = frozenset(
    {
        "echo", "printf", "grep", "egrep", "fgrep", "rg", "cat", "less", "more", "head", "tail",
        "pgrep", "pkill", "kill", "killall", "ps", "which", "whereis", "type", "pip", "pip3",
        "man", "awk", "sed", "vi", "vim", "nano", "ls", "find", "journalctl",
    }
)  # fmt: skip
_RESERVED = frozenset({"{", "!", "if", "then", "elif", "else", "while", "until", "do"})
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_NUMBER = re.compile(r"-(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")

_DUP = re.compile(r"\d*[<>]&(?:\d+|-)")
_STDOUT_REDIRECT = re.compile(r"(\d*)(>>|>\||>&|>)|(&>>|&>)")


@dataclass
class Argument:
    """One SGLang option as typed: `--tp 8`, `--tp=8` or a bare boolean `--enable-x`."""

    flag: str
    value: str | None
    joined: bool


# --------------------------------------------------------------------------- structure


@dataclass
class SimpleCommand:
    """A simple command: its words, its redirections and the operator that ends it."""

    index: int
    words: list[Token] = field(default_factory=list)
    redirects: list[tuple[str, Token | None]] = field(default_factory=list)
    term: str | None = None


@dataclass
class ShellLevel:
    """One shell level: the top text, or the value of a word handed to `bash -c` / `ssh`."""

    text: str
    toks: list[Token]
    cmds: list[SimpleCommand]
    parent: ShellLevel | None = None
    word: Token | None = None


@dataclass
class LaunchSite:
    """Where the SGLang launch sits, and what wraps it on the way out."""

    level: ShellLevel
    cmd: SimpleCommand
    entry: tuple[int, int]
    env: dict[str, str]
    wrappers: list[str]
    outer: list[tuple[ShellLevel, SimpleCommand]]
    extra: int  # extra shell evaluations of this level's words (ssh with several words)


def _split_commands(toks: list[Token]) -> list[SimpleCommand]:
    """Group tokens into simple commands; redirection targets are not words."""
    cmds: list[SimpleCommand] = []
    cur = SimpleCommand(0)
    pending = False
    for tok in toks:
        if tok.kind == "word" and pending:
            cur.redirects[-1] = (cur.redirects[-1][0], tok)
            pending = False
        elif tok.kind == "word":
            cur.words.append(tok)
        elif "<" in tok.value or ">" in tok.value:
            cur.redirects.append((tok.value, None))
            pending = not _DUP.fullmatch(tok.value)
        else:
            cur.term, pending = tok.value, False
            cmds.append(cur)
            cur = SimpleCommand(0)
    cmds.append(cur)
    kept = [c for c in cmds if c.words or c.redirects]
    for index, cmd in enumerate(kept):
        cmd.index = index
    return kept


def _basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _entry_length(words: list[Token], i: int) -> int:
    """Number of words of an SGLang entry point starting at words[i], 0 if none."""
    base = _basename(words[i].value)
    if base == "sglang" and i + 1 < len(words) and words[i + 1].value == "serve":
        return 2
    if not _PYTHON.fullmatch(base):
        return 0
    j = i + 1
    while j < len(words) and words[j].value.startswith("-") and words[j].value != "-m":
        j += 2 if words[j].value in ("-X", "-W") else 1
    if j + 1 < len(words) and words[j].value == "-m" and words[j + 1].value in _MODULES:
        return j + 2 - i
    return 0


@lru_cache(maxsize=64)
def _launch_site(text: str) -> LaunchSite | None:
    """The launch in a command text. A run asks about the same launch line many times
    (finding it, choosing it, checking it); the shell parse is done once (nothing changes
    a LaunchSite once built: edits parse the edited text anew)."""
    return _scan_level(text, None, None, 0)


def _scan_level(text: str, parent: ShellLevel | None, word: Token | None, extra: int) -> LaunchSite | None:
    """Lex one shell level and return the first SGLang launch found in it."""
    toks = ShellLexer(text).run()
    level = ShellLevel(text, toks, _split_commands(toks), parent, word)
    for cmd in level.cmds:
        found = _scan_command(level, cmd, extra)
        if found is not None:
            return found
    return None


def _scan_command(level: ShellLevel, cmd: SimpleCommand, extra: int) -> LaunchSite | None:
    """Walk env prefixes and wrappers up to the entry point, descending into -c / ssh."""
    words, env, wrappers = cmd.words, {}, []
    i, wrapped = 0, False
    while i < len(words):
        value = words[i].value
        base = _basename(value)
        if m := _ASSIGN.match(value):
            env[m.group(1)] = value[m.end() :]
        elif not wrapped and value in _RESERVED:
            pass
        elif length := _entry_length(words, i):
            return LaunchSite(level, cmd, (i, i + length), env, wrappers, [], extra)
        elif base in _SHELLS:
            script = shell_script_index([w.value for w in words], i)
            if script is None:
                return None
            inner = _scan_level(words[script].value, level, words[script], extra)
            return _wrap(inner, env, [*wrappers, f"{base} -c"], level, cmd)
        elif base == "ssh":
            host = ssh_host_index([w.value for w in words], i)
            remote = words[host + 1 :]
            wrappers.append("ssh")
            if len(remote) == 1:
                inner = _scan_level(remote[0].value, level, remote[0], extra)
                return _wrap(inner, env, wrappers, level, cmd)
            i, wrapped, extra = host + 1, False, extra + 1
            continue
        elif base in _WRAPPERS:
            wrappers.append(base)
            wrapped = True
        elif not wrapped or base in _NOT_LAUNCHERS:
            return None
        i += 1
    return None


def _wrap(
    inner: LaunchSite | None,
    env: dict[str, str],
    wrappers: list[str],
    level: ShellLevel,
    cmd: SimpleCommand,
) -> LaunchSite | None:
    """Attach the outer command's env, wrappers and context to a launch found inside it."""
    if inner is None:
        return None
    inner.env = {**env, **inner.env}
    inner.wrappers = [*wrappers, *inner.wrappers]
    inner.outer.insert(0, (level, cmd))
    return inner


# --------------------------------------------------------------------------- arguments


@dataclass
class ArgumentSlot:
    """An Argument and the tokens it was read from."""

    arg: Argument
    flag_tok: Token
    value_tok: Token | None


def _is_flag(value: str) -> bool:
    return value.startswith("-") and len(value) > 1 and not _NUMBER.fullmatch(value)


def _wants_value(flag: str, following: str, takes_value: TakesValue | None) -> bool:
    """The callback decides; a following --option is never a value (as in argparse)."""
    decision = takes_value(flag) if takes_value is not None else None
    if following.startswith("--"):
        return False
    return True if decision is None else decision


def _remote_value(value: str, extra: int) -> str:
    """What a word means after `extra` more shell evaluations (ssh re-parses its words)."""
    for _ in range(extra):
        try:
            value = " ".join(shlex.split(value))
        except ValueError:
            break
    return value


def _read_arguments(
    words: list[Token], takes_value: TakesValue | None, extra: int = 0
) -> tuple[list[ArgumentSlot], list[Token]]:
    """Split the words after the entry point into options and positionals."""
    slots: list[ArgumentSlot] = []
    positionals: list[Token] = []
    values = [_remote_value(w.value, extra) for w in words]
    k = 0
    while k < len(words):
        word, value = words[k], values[k]
        following = values[k + 1] if k + 1 < len(words) else None
        if value == "--":
            positionals.extend(words[k:])
            break
        if not _is_flag(value):
            positionals.append(word)
        elif value.startswith("--") and "=" in value:
            flag, _, rest = value.partition("=")
            slots.append(ArgumentSlot(Argument(flag, rest, True), word, None))
        elif following is not None and _wants_value(value, following, takes_value):
            slots.append(ArgumentSlot(Argument(value, following, False), word, words[k + 1]))
            k += 1
        else:
            slots.append(ArgumentSlot(Argument(value, None, False), word, None))
        k += 1
    return slots, positionals


def pipeline(cmds: list[SimpleCommand], cmd: SimpleCommand) -> list[SimpleCommand]:
    """The command and the ones it pipes into."""
    members = [cmd]
    while members[-1].term in ("|", "|&") and members[-1].index + 1 < len(cmds):
        members.append(cmds[members[-1].index + 1])
    return members


def log_target(cmds: list[SimpleCommand], cmd: SimpleCommand) -> str | None:
    """Where this command's output lands: `> f`, `&> f`, `| tee f`, else `2> f`."""
    stdout = stderr = None
    for op, target in cmd.redirects:
        m = _STDOUT_REDIRECT.fullmatch(op)
        if target is None or m is None:
            continue
        fd = m.group(1) or "1"
        if fd == "1" or m.group(3):
            stdout = target.value
        elif fd == "2":
            stderr = target.value
    return stdout or _tee_target(pipeline(cmds, cmd)[1:]) or stderr


def _tee_target(downstream: list[SimpleCommand]) -> str | None:
    for member in downstream:
        if member.words and _basename(member.words[0].value) == "tee":
            files = [w.value for w in member.words[1:] if not w.value.startswith("-")]
            if files:
                return files[0]
    return None


@dataclass
class CommandState:
    """What render/apply need beyond the public fields: the text and the token map."""

    text: str
    found: LaunchSite
    slots: list[ArgumentSlot]
    positionals: list[Token]
    takes_value: TakesValue | None
    snapshot: list[tuple[str, str | None, bool]] = field(default_factory=list)


def parse_state(text: str, takes_value: TakesValue | None) -> CommandState | None:
    found = _launch_site(text)
    if found is None:
        return None
    words = found.cmd.words[found.entry[1] :]
    slots, positionals = _read_arguments(words, takes_value, found.extra)
    snapshot = [(s.arg.flag, s.arg.value, s.arg.joined) for s in slots]
    return CommandState(text, found, slots, positionals, takes_value, snapshot)

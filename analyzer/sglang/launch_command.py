"""The launch-command model: parse the command that started SGLang and edit it minimally.

Users paste whatever they ran: env prefixes, `nohup`, `bash -c '...'`, `ssh host "..."`,
redirections, backslash continuations. We keep every byte around SGLang's own arguments so a
corrected command differs from the original only where an edit applies (the user can diff the
two), and we quote new values for every shell level they pass through, so an edit can never
inject shell syntax.

How: a small shell lexer records, for every character of a word's unquoted value, where it came
from in the raw text and under which quoting. A string handed to `bash -c` or `ssh` is lexed
again as its own level. An edit becomes splices of the innermost level; each splice is lifted
outward, escaped for the quoting it lands in, until it is a splice of the original text.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from analyzer.core.model import Edit

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
_SSH_VALUE_OPTS = frozenset("BbcDEeFIiJLlmOoPpQRSWw")
_ASSIGN = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)=")
_NUMBER = re.compile(r"-(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")

_WS = " \t\r"
_WORD_END = frozenset(" \t\r\n;&|<>()")
_CONT = re.compile(r"\\\r?\n")
_CONT_ONLY = re.compile(r"(?:\\\r?\n)*")
_OP = re.compile(
    r"\d*[<>]&(?:\d+|-)(?=[\s;&|<>()]|$)"  # fd duplication: 2>&1, >&-
    r"|&>>|&>|\d*>>|\d*>\||\d*<>|\d*>&|\d*<&|\d*<<<|\d*<<-?|\d*>|\d*<"
    r"|\|\||\|&|\||&&|&|;;|;|\(|\)|\n"
)
_DUP = re.compile(r"\d*[<>]&(?:\d+|-)")
_STDOUT_REDIRECT = re.compile(r"(\d*)(>>|>\||>&|>)|(&>>|&>)")
_ANSI_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a",
                 "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "v": "\v"}  # fmt: skip
_HINT = re.compile(r"launch_server|sglang\S*\s+\S*serve")
_PROMPT = re.compile(
    r"""^\s*(?:
        \+{1,4}[ ]                                              # set -x trace
      | (?:\([^()\s]+\)[ ]+)?                                   # (venv) / (base)
        (?:
            \[[^\]\n]*\][ ]?[$#%][ ]                            # [user@host dir]$
          | [\w.-]+@[\w.-]+(?:[:][^\s]*|[ ][~/][^\s]*)?[ ]?[$#%][ ]  # user@host:~$
          | [\w.]+-\d[\d.]*[$#][ ]                              # bash-5.1$
          | (?:[~/][^\s]*[ ]?)?[$#%>\u276f][ ]                  # $ / # / ~/dir $
        )
    )""",
    re.X,
)


@dataclass
class Argument:
    """One SGLang option as typed: `--tp 8`, `--tp=8` or a bare boolean `--enable-x`."""

    flag: str
    value: str | None
    joined: bool


# --------------------------------------------------------------------------- lexer


@dataclass
class _Tok:
    """A word or operator; for words, where each unquoted character came from.

    `src[k]`/`stop[k]` bound the raw text that produced `value[k]`; `ctx[k]` is its quoting:
    U unquoted, S '...', D "...", A $'...', X inside $(...)/${...}/`...` (never spliced into).
    `anchors` are (value index, raw position, ctx) just inside each quote, so an insertion next
    to a quoted section can go inside it (even an empty one) rather than beside it.
    """

    kind: str
    start: int
    end: int
    value: str
    index: int
    src: list[int] = field(default_factory=list)
    stop: list[int] = field(default_factory=list)
    ctx: str = ""
    anchors: list[tuple[int, int, str]] = field(default_factory=list)


class _WordBuf:
    """Accumulates a word's value together with its source map."""

    def __init__(self) -> None:
        self.chars: list[str] = []
        self.src: list[int] = []
        self.stop: list[int] = []
        self.ctx: list[str] = []
        self.anchors: list[tuple[int, int, str]] = []

    def add(self, char: str, start: int, stop: int, ctx: str) -> None:
        self.chars.append(char)
        self.src.append(start)
        self.stop.append(stop)
        self.ctx.append(ctx)

    def anchor(self, raw: int, ctx: str) -> None:
        self.anchors.append((len(self.chars), raw, ctx))

    def token(self, start: int, end: int, index: int) -> _Tok:
        value = "".join(self.chars)
        ctx = "".join(self.ctx)
        return _Tok("word", start, end, value, index, self.src, self.stop, ctx, self.anchors)


class _Lexer:
    """Just enough of the POSIX/bash lexer to find words, quotes and operators.

    Lenient on purpose: pasted commands are often truncated, so an unterminated quote runs to
    the end of the text instead of failing.
    """

    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0
        self.toks: list[_Tok] = []

    def run(self) -> list[_Tok]:
        text = self.text
        while self.i < len(text):
            char = text[self.i]
            if char in _WS:
                self.i += 1
            elif m := _CONT.match(text, self.i):
                self.i = m.end()
            elif char == "#":
                newline = text.find("\n", self.i)
                self.i = len(text) if newline < 0 else newline
            elif m := _OP.match(text, self.i):
                self.toks.append(_Tok("op", m.start(), m.end(), m.group(), len(self.toks)))
                self.i = m.end()
            else:
                self._word()
        return self.toks

    def _word(self) -> None:
        text, start, buf = self.text, self.i, _WordBuf()
        while self.i < len(text) and text[self.i] not in _WORD_END:
            char = text[self.i]
            if char == "\\":
                self._backslash(buf)
            elif char == "'":
                self._single(buf)
            elif char == '"':
                self._double(buf)
            elif text.startswith("$'", self.i):
                self._ansi(buf)
            elif char == "`" or text.startswith(("$(", "${"), self.i):
                self._expansion(buf)
            else:
                buf.add(char, self.i, self.i + 1, "U")
                self.i += 1
        self.toks.append(buf.token(start, self.i, len(self.toks)))

    def _backslash(self, buf: _WordBuf) -> None:
        if m := _CONT.match(self.text, self.i):
            self.i = m.end()
        elif self.i + 1 < len(self.text):
            buf.add(self.text[self.i + 1], self.i, self.i + 2, "U")
            self.i += 2
        else:
            self.i += 1

    def _single(self, buf: _WordBuf) -> None:
        close = self.text.find("'", self.i + 1)
        close = len(self.text) if close < 0 else close
        buf.anchor(self.i + 1, "S")
        for k in range(self.i + 1, close):
            buf.add(self.text[k], k, k + 1, "S")
        buf.anchor(close, "S")
        self.i = min(close + 1, len(self.text))

    def _double(self, buf: _WordBuf) -> None:
        text = self.text
        self.i += 1
        buf.anchor(self.i, "D")
        while self.i < len(text) and text[self.i] != '"':
            char = text[self.i]
            if char == "\\" and (m := _CONT.match(text, self.i)):
                self.i = m.end()
            elif char == "\\" and self.i + 1 < len(text) and text[self.i + 1] in '$`"\\':
                buf.add(text[self.i + 1], self.i, self.i + 2, "D")
                self.i += 2
            elif char == "`" or text.startswith(("$(", "${"), self.i):
                self._expansion(buf)
            else:
                buf.add(char, self.i, self.i + 1, "D")
                self.i += 1
        buf.anchor(self.i, "D")
        self.i = min(self.i + 1, len(text))

    def _ansi(self, buf: _WordBuf) -> None:
        text = self.text
        self.i += 2
        buf.anchor(self.i, "A")
        while self.i < len(text) and text[self.i] != "'":
            if text[self.i] == "\\" and self.i + 1 < len(text):
                escaped = text[self.i + 1]
                buf.add(_ANSI_ESCAPES.get(escaped, "\\" + escaped), self.i, self.i + 2, "A")
                self.i += 2
            else:
                buf.add(text[self.i], self.i, self.i + 1, "A")
                self.i += 1
        buf.anchor(self.i, "A")
        self.i = min(self.i + 1, len(text))

    def _expansion(self, buf: _WordBuf) -> None:
        end = expansion_end(self.text, self.i)
        for k in range(self.i, end):
            buf.add(self.text[k], k, k + 1, "X")
        self.i = end


def expansion_end(text: str, i: int) -> int:
    """End of the `...`, $(...) or ${...} starting at i (end of text if unterminated)."""
    n = len(text)
    if text[i] == "`":
        j = i + 1
        while j < n and text[j] != "`":
            j += 2 if text[j] == "\\" else 1
        return min(j + 1, n)
    opener, closer = ("(", ")") if text[i + 1] == "(" else ("{", "}")
    depth, j = 0, i + 1
    while j < n:
        char = text[j]
        if char == "\\":
            j += 2
            continue
        if char == "'" and opener == "(":
            close = text.find("'", j + 1)
            j = n if close < 0 else close + 1
            continue
        if char == opener:
            depth += 1
        elif char == closer:
            depth -= 1
            if depth == 0:
                return j + 1
        j += 1
    return n


# --------------------------------------------------------------------------- structure


@dataclass
class _Cmd:
    """A simple command: its words, its redirections and the operator that ends it."""

    index: int
    words: list[_Tok] = field(default_factory=list)
    redirects: list[tuple[str, _Tok | None]] = field(default_factory=list)
    term: str | None = None


@dataclass
class _Level:
    """One shell level: the top text, or the value of a word handed to `bash -c` / `ssh`."""

    text: str
    toks: list[_Tok]
    cmds: list[_Cmd]
    parent: _Level | None = None
    word: _Tok | None = None


@dataclass
class _Found:
    """Where the SGLang launch sits, and what wraps it on the way out."""

    level: _Level
    cmd: _Cmd
    entry: tuple[int, int]
    env: dict[str, str]
    wrappers: list[str]
    outer: list[tuple[_Level, _Cmd]]
    extra: int  # extra shell evaluations of this level's words (ssh with several words)


def _split_commands(toks: list[_Tok]) -> list[_Cmd]:
    """Group tokens into simple commands; redirection targets are not words."""
    cmds: list[_Cmd] = []
    cur = _Cmd(0)
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
            cur = _Cmd(0)
    cmds.append(cur)
    kept = [c for c in cmds if c.words or c.redirects]
    for index, cmd in enumerate(kept):
        cmd.index = index
    return kept


def _basename(word: str) -> str:
    return word.rsplit("/", 1)[-1]


def _entry_length(words: list[_Tok], i: int) -> int:
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


def _shell_script_index(words: list[_Tok], i: int) -> int | None:
    """Index of the command string of `bash [opts] -c STRING`, None if not a -c call."""
    j, has_c = i + 1, False
    while j < len(words):
        value = words[j].value
        if value in ("-o", "+o", "-O", "+O"):
            j += 2
        elif value == "--":
            j += 1
            break
        elif len(value) > 1 and value[0] in "-+":
            has_c = has_c or (value[0] == "-" and value[1] != "-" and "c" in value)
            j += 1
        else:
            break
    return j if has_c and j < len(words) else None


def _ssh_host_index(words: list[_Tok], i: int) -> int:
    """Index of the host word of `ssh [opts] host ...`."""
    j = i + 1
    while j < len(words):
        value = words[j].value
        if value == "--":
            return j + 1
        if not value.startswith("-") or value == "-":
            return j
        j += _ssh_option_words(value)
    return j


def _ssh_option_words(option: str) -> int:
    """1 if the option cluster is self-contained, 2 if it consumes the next word."""
    for k, char in enumerate(option[1:], 1):
        if char in _SSH_VALUE_OPTS:
            return 1 if k < len(option) - 1 else 2
    return 1


def _scan_level(text: str, parent: _Level | None, word: _Tok | None, extra: int) -> _Found | None:
    """Lex one shell level and return the first SGLang launch found in it."""
    toks = _Lexer(text).run()
    level = _Level(text, toks, _split_commands(toks), parent, word)
    for cmd in level.cmds:
        found = _scan_command(level, cmd, extra)
        if found is not None:
            return found
    return None


def _scan_command(level: _Level, cmd: _Cmd, extra: int) -> _Found | None:
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
            return _Found(level, cmd, (i, i + length), env, wrappers, [], extra)
        elif base in _SHELLS:
            script = _shell_script_index(words, i)
            if script is None:
                return None
            inner = _scan_level(words[script].value, level, words[script], extra)
            return _wrap(inner, env, [*wrappers, f"{base} -c"], level, cmd)
        elif base == "ssh":
            host = _ssh_host_index(words, i)
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
    inner: _Found | None, env: dict[str, str], wrappers: list[str], level: _Level, cmd: _Cmd
) -> _Found | None:
    """Attach the outer command's env, wrappers and context to a launch found inside it."""
    if inner is None:
        return None
    inner.env = {**env, **inner.env}
    inner.wrappers = [*wrappers, *inner.wrappers]
    inner.outer.insert(0, (level, cmd))
    return inner


# --------------------------------------------------------------------------- arguments


@dataclass
class _Slot:
    """An Argument and the tokens it was read from."""

    arg: Argument
    flag_tok: _Tok
    value_tok: _Tok | None


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
    words: list[_Tok], takes_value: TakesValue | None, extra: int = 0
) -> tuple[list[_Slot], list[_Tok]]:
    """Split the words after the entry point into options and positionals."""
    slots: list[_Slot] = []
    positionals: list[_Tok] = []
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
            slots.append(_Slot(Argument(flag, rest, True), word, None))
        elif following is not None and _wants_value(value, following, takes_value):
            slots.append(_Slot(Argument(value, following, False), word, words[k + 1]))
            k += 1
        else:
            slots.append(_Slot(Argument(value, None, False), word, None))
        k += 1
    return slots, positionals


def _pipeline(cmds: list[_Cmd], cmd: _Cmd) -> list[_Cmd]:
    """The command and the ones it pipes into."""
    members = [cmd]
    while members[-1].term in ("|", "|&") and members[-1].index + 1 < len(cmds):
        members.append(cmds[members[-1].index + 1])
    return members


def _log_target(cmds: list[_Cmd], cmd: _Cmd) -> str | None:
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
    return stdout or _tee_target(_pipeline(cmds, cmd)[1:]) or stderr


def _tee_target(downstream: list[_Cmd]) -> str | None:
    for member in downstream:
        if member.words and _basename(member.words[0].value) == "tee":
            files = [w.value for w in member.words[1:] if not w.value.startswith("-")]
            if files:
                return files[0]
    return None


# --------------------------------------------------------------------------- model


@dataclass
class _State:
    """What render/apply need beyond the public fields: the text and the token map."""

    text: str
    found: _Found
    slots: list[_Slot]
    positionals: list[_Tok]
    takes_value: TakesValue | None
    snapshot: list[tuple[str, str | None, bool]] = field(default_factory=list)


@dataclass
class LaunchCommand:
    """A parsed SGLang launch that renders back byte-for-byte and edits minimally."""

    original: str
    entry: str
    arguments: list[Argument]
    env: dict[str, str]
    wrappers: list[str]
    log_path: str | None
    background: bool
    _state: _State | None = field(default=None, repr=False, compare=False)

    def get(self, flag: str) -> str | None:
        """Value of the last occurrence of the typed flag (argparse keeps the last one)."""
        values = [a.value for a in self.arguments if a.flag == flag]
        return values[-1] if values else None

    def has(self, flag: str) -> bool:
        return any(a.flag == flag for a in self.arguments)

    def flags(self) -> list[str]:
        return [a.flag for a in self.arguments]

    @property
    def positionals(self) -> list[str]:
        """Words after the entry point that are neither options nor option values."""
        return [t.value for t in self._state.positionals] if self._state else []

    def render(self) -> str:
        """The command text: the original for a parsed model, the edited text after apply().

        Edits go through apply(): the model cannot re-render arguments changed in place, and
        says so rather than return a text that silently ignores the change.
        """
        if self._state is None:
            return self.original
        if [(a.flag, a.value, a.joined) for a in self.arguments] != self._state.snapshot:
            raise ValueError("arguments were changed in place; use LaunchCommand.apply()")
        return self._state.text

    def apply(self, edits: list[Edit], canonical: Canonical | None = None) -> LaunchCommand:
        """A new command with the edits applied in order; `original` stays the user's text."""
        state = self._state or _parse_state(self.original, None)
        if state is None:
            raise ValueError("not an SGLang launch command")
        for edit in edits:
            text = _apply_splices(state.found, _edit_splices(state, edit, canonical))
            new_state = _parse_state(text, state.takes_value)
            if new_state is None:
                raise ValueError(f"edit {edit!r} produced an unparsable command")
            state = new_state
        return replace(_model(state), original=self.original)


def parse_launch_command(text: str, takes_value: TakesValue | None = None) -> LaunchCommand | None:
    """Parse a pasted command; None when it holds no SGLang launch."""
    state = _parse_state(text, takes_value)
    return _model(state) if state is not None else None


def find_launch_command(text: str) -> str | None:
    """The launch command on a log/transcript line (shell prompt stripped), else None.

    Cheap enough for every line: a substring test rules out almost all of them first.
    """
    line = text.rstrip("\r\n")
    if not _HINT.search(line):
        return None
    m = _PROMPT.match(line)
    command = line[m.end() :] if m else line.lstrip()
    return command if _parse_state(command, None) is not None else None


def _parse_state(text: str, takes_value: TakesValue | None) -> _State | None:
    found = _scan_level(text, None, None, 0)
    if found is None:
        return None
    words = found.cmd.words[found.entry[1] :]
    slots, positionals = _read_arguments(words, takes_value, found.extra)
    snapshot = [(s.arg.flag, s.arg.value, s.arg.joined) for s in slots]
    return _State(text, found, slots, positionals, takes_value, snapshot)


def _model(state: _State) -> LaunchCommand:
    found = state.found
    start, stop = found.entry
    contexts = [(found.level, found.cmd), *reversed(found.outer)]
    log_path = next((p for lv, c in contexts if (p := _log_target(lv.cmds, c)) is not None), None)
    background = any(_pipeline(lv.cmds, c)[-1].term == "&" for lv, c in contexts)
    return LaunchCommand(
        original=state.text,
        entry=" ".join(w.value for w in found.cmd.words[start:stop]),
        arguments=[replace(slot.arg) for slot in state.slots],
        env=dict(found.env),
        wrappers=list(found.wrappers),
        log_path=log_path,
        background=background,
        _state=state,
    )


# --------------------------------------------------------------------------- edits

# A splice replaces [start, end) with text. With a token it is in that word's value space
# (text is literal characters); without one it is in the innermost level's text (shell text).
_Splice = tuple[_Tok | None, int, int, str]


def _matches(typed: str, wanted: str, canonical: Canonical | None) -> bool:
    return typed == wanted or (canonical is not None and canonical(typed) == wanted)


def _quote(value: str, times: int) -> str:
    for _ in range(times):
        value = shlex.quote(value)
    return value


def _edit_splices(state: _State, edit: Edit, canonical: Canonical | None) -> list[_Splice]:
    """Turn one Edit into splices of the innermost level."""
    hits = [s for s in state.slots if _matches(s.arg.flag, edit.flag, canonical)]
    if edit.op == "remove":
        return [_remove(state, slot) for slot in hits]
    if edit.op == "add" or (edit.op == "set" and not hits):
        return [_add(state, edit.flag, edit.value)]
    if edit.op == "set":
        earlier = [_remove(state, slot) for slot in hits[:-1]]
        return earlier + _set_value(state, hits[-1], edit.value)
    if edit.op == "rename":
        if not edit.to:
            raise ValueError(f"rename of {edit.flag} needs `to`")
        if not hits:
            return _name_positional(state, edit.flag, edit.to)
        splices: list[_Splice] = []
        for slot in hits:
            splices.append(_rename(state, slot, edit.to))
            if edit.value is not None:
                splices.extend(_set_value(state, slot, edit.value))
        return splices
    raise ValueError(f"unknown edit op {edit.op!r}")


def _remove(state: _State, slot: _Slot) -> _Splice:
    """Delete the argument and the whitespace (continuations included) before it."""
    last = slot.value_tok or slot.flag_tok
    previous = state.found.level.toks[slot.flag_tok.index - 1]
    return (None, previous.end, last.end, "")


def _add(state: _State, flag: str, value: str | None) -> _Splice:
    """Append after the last word of the SGLang command, reusing a `\\`-newline layout."""
    extra = state.found.extra
    text = _separator(state) + _quote(flag, extra + 1)
    if value is not None:
        text += " " + _quote(value, extra + 1)
    last = state.found.cmd.words[-1]
    return (None, last.end, last.end, text)


def _separator(state: _State) -> str:
    if not state.slots:
        return " "
    flag_tok = state.slots[-1].flag_tok
    level = state.found.level
    gap = level.text[level.toks[flag_tok.index - 1].end : flag_tok.start]
    return gap if re.fullmatch(r"[ \t]*\\\r?\n[ \t]*", gap) else " "


def _set_value(state: _State, slot: _Slot, value: str | None) -> list[_Splice]:
    extra, flag_tok, value_tok = state.found.extra, slot.flag_tok, slot.value_tok
    if slot.arg.joined:
        cut = len(slot.arg.flag)
        if value is None:
            return [(flag_tok, cut, len(flag_tok.value), "")]
        return [(flag_tok, cut + 1, len(flag_tok.value), _quote(value, extra))]
    if value_tok is not None and value is None:
        return [(None, flag_tok.end, value_tok.end, "")]
    if value_tok is not None:
        return [(None, value_tok.start, value_tok.end, _quote(value, extra + 1))]
    if value is None:
        return []
    return [(None, flag_tok.end, flag_tok.end, " " + _quote(value, extra + 1))]


def _name_positional(state: _State, word: str, flag: str) -> list[_Splice]:
    """`rename` of a positional word (a vLLM-style model path) puts the flag before it."""
    for tok in state.positionals:
        if tok.value == word:
            return [(None, tok.start, tok.start, _quote(flag, state.found.extra + 1) + " ")]
    return []


def _rename(state: _State, slot: _Slot, to: str) -> _Splice:
    extra, tok = state.found.extra, slot.flag_tok
    if slot.arg.joined:
        return (tok, 0, len(slot.arg.flag), _quote(to, extra))
    return (None, tok.start, tok.end, _quote(to, extra + 1))


def _apply_splices(found: _Found, splices: list[_Splice]) -> str:
    """Lift the splices to the top-level text and apply them there."""
    level = found.level
    lifted = [(s, e, t) for tok, s, e, t in splices if tok is None]
    for tok in {id(t): t for t, *_ in splices if t is not None}.values():
        group = [(s, e, t) for owner, s, e, t in splices if owner is tok]
        lifted.extend(_lift(level.text, tok, group))
    while level.parent is not None and level.word is not None:
        lifted = _lift(level.parent.text, level.word, lifted)
        level = level.parent
    text = level.text
    for start, end, new in sorted(lifted, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _lift(text: str, word: _Tok, splices: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    """Map splices of `word`'s value onto `text`, escaping for the quoting they land in.

    When a splice straddles quoting boundaries, the whole word is re-quoted instead.
    """
    ordered = sorted(splices)
    lifted = [_lift_one(text, word, s, e, t) for s, e, t in ordered]
    if all(item is not None for item in lifted):
        return [item for item in lifted if item is not None]
    value = word.value
    for start, end, new in reversed(ordered):
        value = value[:start] + new + value[end:]
    return [(word.start, word.end, _requote(text[word.start : word.end], value))]


def _lift_one(text: str, word: _Tok, start: int, end: int, new: str) -> tuple[int, int, str] | None:
    if start == end:
        return _lift_insertion(word, start, new)
    ctx = word.ctx[start:end]
    if len(set(ctx)) != 1 or ctx[0] == "X":
        return None
    for k in range(start, end - 1):
        if not _CONT_ONLY.fullmatch(text, word.stop[k], word.src[k + 1]):
            return None
    return (word.src[start], word.stop[end - 1], _escape(new, ctx[0]))


def _lift_insertion(word: _Tok, at: int, new: str) -> tuple[int, int, str] | None:
    """Insert at value index `at`: inside quotes if a raw position there allows it, preferring
    the word's main quoting (the readable spot in `bash -c '...'`)."""
    options = [(raw, ctx) for index, raw, ctx in word.anchors if index == at]
    if at > 0:
        options.append((word.stop[at - 1], word.ctx[at - 1]))
    if at < len(word.value):
        options.append((word.src[at], word.ctx[at]))
    options = [option for option in options if option[1] != "X"]
    if not options:
        return None
    dominant = max("SDAU", key=word.ctx.count)
    raw, ctx = min(options, key=lambda option: (option[1] == "U", option[1] != dominant))
    return (raw, raw, _escape(new, ctx))


def _escape(new: str, ctx: str) -> str:
    """Literal characters -> raw text that means them under the given quoting."""
    if not new:
        return ""
    if ctx == "S":
        return new.replace("'", "'\\''")
    if ctx == "D":
        return re.sub(r'([\\"$`])', r"\\\1", new)
    if ctx == "A":
        return new.replace("\\", "\\\\").replace("'", "\\'")
    return shlex.quote(new)


def _requote(raw: str, value: str) -> str:
    """Quote a whole word again, in the style it was written in when possible."""
    if raw.startswith("'"):
        return "'" + _escape(value, "S") + "'"
    if raw.startswith('"'):
        return '"' + _escape(value, "D") + '"'
    return shlex.quote(value)

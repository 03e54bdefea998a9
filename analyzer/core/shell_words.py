"""The one shell lexer: words, quotes, operators and heredocs, the way bash splits them.

Two readers need it. The launch-command model (analyzer/sglang/launch_command.py) edits a
command byte-exactly, so every character of a word's unquoted value records where it came
from in the raw text and under which quoting. The transcript reader
(analyzer/transcripts/shell.py) needs whole session commands, heredoc bodies included, and
wants to know when a quote never closes. Both get the same tokens from `ShellLexer`.

Lenient on purpose: pasted commands are often truncated, so an unterminated quote runs to
the end of the text instead of failing (and is reported to `on_unterminated`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field

SPACE = " \t\r"
WORD_END = frozenset(" \t\r\n;&|<>()")
COMMENT_AFTER = frozenset(" \t\n;&|()")
CONTINUATION = re.compile(r"\\\r?\n")
OPERATOR = re.compile(
    r"\d*[<>]&(?:\d+|-)(?=[\s;&|<>()]|$)"  # fd duplication: 2>&1, >&-
    r"|&>>|&>|\d*>>|\d*>\||\d*<>|\d*>&|\d*<&|\d*<<<|\d*<<-?|\d*>|\d*<"
    r"|\|\||\|&|\||&&|&|;;|;|\(|\)|\n"
)
ANSI_C_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "\\": "\\", "'": "'", '"': '"', "a": "\a",
                  "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "v": "\v"}  # fmt: skip


@dataclass
class Token:
    """A word, an operator or a heredoc body; for words, where each value character came from.

    `src[k]`/`stop[k]` bound the raw text that produced `value[k]`; `ctx[k]` is its quoting:
    U unquoted, S '...', D "...", A $'...', X inside $(...)/${...}/`...` (never spliced into).
    `anchors` are (value index, raw position, ctx) just inside each quote, opening and
    closing, so an insertion next to a quoted section can go inside it (even an empty one).
    """

    kind: str  # word | op | heredoc
    start: int
    end: int
    value: str
    index: int
    src: list[int] = field(default_factory=list)
    stop: list[int] = field(default_factory=list)
    ctx: str = ""
    anchors: list[tuple[int, int, str]] = field(default_factory=list)

    @property
    def quotes(self) -> str:
        """The quote characters the word used, one per quoted section (`'` for $'...')."""
        return "".join('"' if ctx == "D" else "'" for _, _, ctx in self.anchors[::2])


class _WordBuffer:
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

    def token(self, start: int, end: int, index: int) -> Token:
        value, ctx = "".join(self.chars), "".join(self.ctx)
        return Token("word", start, end, value, index, self.src, self.stop, ctx, self.anchors)


class ShellLexer:
    """Just enough of the POSIX/bash lexer to find words, quotes, operators and heredocs.

    `heredocs`: read `<<WORD` bodies as one `heredoc` token after the line that opens them
    (a session command writing a script); off, their lines are lexed as commands.
    """

    def __init__(
        self,
        text: str,
        heredocs: bool = False,
        on_unterminated: Callable[[int], None] | None = None,
    ) -> None:
        self.text = text
        self.i = 0
        self.tokens: list[Token] = []
        self.read_heredocs = heredocs
        self.on_unterminated = on_unterminated
        self.pending_heredocs: list[tuple[str, bool]] = []
        self.expect_delimiter: bool | None = None

    def run(self) -> list[Token]:
        text = self.text
        while self.i < len(text):
            char = text[self.i]
            if char in SPACE:
                self.i += 1
            elif m := CONTINUATION.match(text, self.i):
                self.i = m.end()
            elif char == "#" and (self.i == 0 or text[self.i - 1] in COMMENT_AFTER):
                newline = text.find("\n", self.i)
                self.i = len(text) if newline < 0 else newline
            elif m := OPERATOR.match(text, self.i):
                self._operator(m.group(), m.start(), m.end())
            else:
                self._word()
        return self.tokens

    def _operator(self, value: str, start: int, end: int) -> None:
        self.tokens.append(Token("op", start, end, value, len(self.tokens)))
        self.i = end
        if not self.read_heredocs:
            return
        if value.endswith(("<<", "<<-")):
            self.expect_delimiter = value.endswith("-")
        elif value == "\n" and self.pending_heredocs:
            self._heredoc_bodies()

    def _heredoc_bodies(self) -> None:
        for delimiter, strip_tabs in self.pending_heredocs:
            start = self.i
            body: list[str] = []
            while self.i < len(self.text):
                newline = self.text.find("\n", self.i)
                end = len(self.text) if newline < 0 else newline
                line = self.text[self.i : end]
                self.i = end + 1 if newline >= 0 else end
                if (line.lstrip("\t") if strip_tabs else line) == delimiter:
                    break
                body.append(line)
            self.tokens.append(Token("heredoc", start, self.i, "\n".join(body), len(self.tokens)))
        self.pending_heredocs = []

    def _word(self) -> None:
        text, start, buf = self.text, self.i, _WordBuffer()
        while self.i < len(text) and text[self.i] not in WORD_END:
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
        token = buf.token(start, self.i, len(self.tokens))
        if self.expect_delimiter is not None:
            self.pending_heredocs.append((token.value, self.expect_delimiter))
            self.expect_delimiter = None
        self.tokens.append(token)

    def _backslash(self, buf: _WordBuffer) -> None:
        if m := CONTINUATION.match(self.text, self.i):
            self.i = m.end()
        elif self.i + 1 < len(self.text):
            buf.add(self.text[self.i + 1], self.i, self.i + 2, "U")
            self.i += 2
        else:
            self.i += 1

    def _single(self, buf: _WordBuffer) -> None:
        close = self.text.find("'", self.i + 1)
        if close < 0:
            self._unterminated(self.i)
            close = len(self.text)
        buf.anchor(self.i + 1, "S")
        for k in range(self.i + 1, close):
            buf.add(self.text[k], k, k + 1, "S")
        buf.anchor(close, "S")
        self.i = min(close + 1, len(self.text))

    def _double(self, buf: _WordBuffer) -> None:
        text, opened = self.text, self.i
        self.i += 1
        buf.anchor(self.i, "D")
        while self.i < len(text) and text[self.i] != '"':
            char = text[self.i]
            if char == "\\" and (m := CONTINUATION.match(text, self.i)):
                self.i = m.end()
            elif char == "\\" and self.i + 1 < len(text) and text[self.i + 1] in '$`"\\':
                buf.add(text[self.i + 1], self.i, self.i + 2, "D")
                self.i += 2
            elif char == "`" or text.startswith(("$(", "${"), self.i):
                self._expansion(buf)
            else:
                buf.add(char, self.i, self.i + 1, "D")
                self.i += 1
        if self.i >= len(text):
            self._unterminated(opened)
        buf.anchor(self.i, "D")
        self.i = min(self.i + 1, len(text))

    def _ansi(self, buf: _WordBuffer) -> None:
        text, opened = self.text, self.i + 1
        self.i += 2
        buf.anchor(self.i, "A")
        while self.i < len(text) and text[self.i] != "'":
            if text[self.i] == "\\" and self.i + 1 < len(text):
                escaped = text[self.i + 1]
                buf.add(ANSI_C_ESCAPES.get(escaped, "\\" + escaped), self.i, self.i + 2, "A")
                self.i += 2
            else:
                buf.add(text[self.i], self.i, self.i + 1, "A")
                self.i += 1
        if self.i >= len(text):
            self._unterminated(opened)
        buf.anchor(self.i, "A")
        self.i = min(self.i + 1, len(text))

    def _expansion(self, buf: _WordBuffer) -> None:
        end = expansion_end(self.text, self.i)
        for k in range(self.i, end):
            buf.add(self.text[k], k, k + 1, "X")
        self.i = end

    def _unterminated(self, at: int) -> None:
        if self.on_unterminated is not None:
            self.on_unterminated(at)


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


# ---- reading command words (shared by the launch-command model and the transcript reader)

SSH_VALUE_OPTIONS = frozenset("BbcDEeFIiJLlmOoPpQRSWw")


def shell_script_index(words: list[str], i: int) -> int | None:
    """Index of STRING in `bash [opts] -c STRING` (the shell at `i`), None if no -c string."""
    j, has_c = i + 1, False
    while j < len(words):
        value = words[j]
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


def ssh_host_index(words: list[str], i: int) -> int:
    """Index of the host word of `ssh [opts] host ...` (ssh at `i`)."""
    j = i + 1
    while j < len(words):
        value = words[j]
        if value == "--":
            return j + 1
        if not value.startswith("-") or value == "-":
            return j
        j += _ssh_option_words(value)
    return j


def _ssh_option_words(option: str) -> int:
    """1 if the option cluster is self-contained, 2 if it consumes the next word."""
    for k, char in enumerate(option[1:], 1):
        if char in SSH_VALUE_OPTIONS:
            return 1 if k < len(option) - 1 else 2
    return 1

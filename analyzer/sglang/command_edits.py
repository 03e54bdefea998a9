"""Edits of a launch command as splices of its innermost shell level, lifted outward.

An edit becomes splices of the innermost level; each splice is lifted outward, escaped for
the quoting it lands in, until it is a splice of the original text, so a corrected command
differs from the original only where the edit applies and new values can never inject
shell syntax.
"""

from __future__ import annotations

import re
import shlex

from analyzer.core.model import Edit
from analyzer.core.shell_words import Token
from analyzer.sglang.command_structure import (
    ArgumentSlot,
    Canonical,
    CommandState,
    LaunchSite,
)

_CONT_ONLY = re.compile(r"(?:\\\r?\n)*")

# A splice replaces [start, end) with text. With a token it is in that word's value space
# (text is literal characters); without one it is in the innermost level's text (shell text).
_Splice = tuple[Token | None, int, int, str]


def _matches(typed: str, wanted: str, canonical: Canonical | None) -> bool:
    return typed == wanted or (canonical is not None and canonical(typed) == wanted)


def _quote(value: str, times: int) -> str:
    for _ in range(times):
        value = shlex.quote(value)
    return value


def edit_splices(state: CommandState, edit: Edit, canonical: Canonical | None) -> list[_Splice]:
    """Turn one Edit into splices of the innermost level."""
    hits = [s for s in state.slots if _matches(s.arg.flag, edit.flag, canonical)]
    if edit.op == "remove":
        return (
            [_remove(state, slot) for slot in hits]
            if hits
            else _remove_positional(state, edit.flag)
        )
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


def _remove(state: CommandState, slot: ArgumentSlot) -> _Splice:
    """Delete the argument and the whitespace (continuations included) before it."""
    last = slot.value_tok or slot.flag_tok
    previous = state.found.level.toks[slot.flag_tok.index - 1]
    return (None, previous.end, last.end, "")


def _remove_positional(state: CommandState, word: str) -> list[_Splice]:
    """`remove` of a stray positional word (`--switch true` leaves `true` to argparse)."""
    for tok in state.positionals:
        if tok.value == word:
            previous = state.found.level.toks[tok.index - 1]
            return [(None, previous.end, tok.end, "")]
    return []


def _add(state: CommandState, flag: str, value: str | None) -> _Splice:
    """Append after the last word of the SGLang command, reusing a `\\`-newline layout."""
    extra = state.found.extra
    text = _separator(state) + _quote(flag, extra + 1)
    if value is not None:
        text += " " + _quote(value, extra + 1)
    last = state.found.cmd.words[-1]
    return (None, last.end, last.end, text)


def _separator(state: CommandState) -> str:
    if not state.slots:
        return " "
    flag_tok = state.slots[-1].flag_tok
    level = state.found.level
    gap = level.text[level.toks[flag_tok.index - 1].end : flag_tok.start]
    return gap if re.fullmatch(r"[ \t]*\\\r?\n[ \t]*", gap) else " "


def _set_value(state: CommandState, slot: ArgumentSlot, value: str | None) -> list[_Splice]:
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


def _name_positional(state: CommandState, word: str, flag: str) -> list[_Splice]:
    """`rename` of a positional word (a vLLM-style model path) puts the flag before it."""
    for tok in state.positionals:
        if tok.value == word:
            return [(None, tok.start, tok.start, _quote(flag, state.found.extra + 1) + " ")]
    return []


def _rename(state: CommandState, slot: ArgumentSlot, to: str) -> _Splice:
    extra, tok = state.found.extra, slot.flag_tok
    if slot.arg.joined:
        return (tok, 0, len(slot.arg.flag), _quote(to, extra))
    return (None, tok.start, tok.end, _quote(to, extra + 1))


def apply_splices(found: LaunchSite, splices: list[_Splice]) -> str:
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


def _lift(
    text: str, word: Token, splices: list[tuple[int, int, str]]
) -> list[tuple[int, int, str]]:
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


def _lift_one(
    text: str, word: Token, start: int, end: int, new: str
) -> tuple[int, int, str] | None:
    if start == end:
        return _lift_insertion(word, start, new)
    ctx = word.ctx[start:end]
    if len(set(ctx)) != 1 or ctx[0] == "X":
        return None
    for k in range(start, end - 1):
        if not _CONT_ONLY.fullmatch(text, word.stop[k], word.src[k + 1]):
            return None
    return (word.src[start], word.stop[end - 1], _escape(new, ctx[0]))


def _lift_insertion(word: Token, at: int, new: str) -> tuple[int, int, str] | None:
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

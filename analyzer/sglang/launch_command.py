"""The launch-command model: parse the command that started SGLang and edit it minimally.

Users paste whatever they ran: env prefixes, `nohup`, `bash -c '...'`, `ssh host "..."`,
redirections, backslash continuations. We keep every byte around SGLang's own arguments so a
corrected command differs from the original only where an edit applies (the user can diff the
two), and we quote new values for every shell level they pass through, so an edit can never
inject shell syntax.

How: the shell lexer records, for every character of a word's unquoted value, where it came
from in the raw text and under which quoting; command_structure.py finds the launch in its
shell levels and reads its arguments; command_edits.py splices edits back into the text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace

from analyzer.core.model import Edit
from analyzer.sglang.command_edits import apply_splices, edit_splices
from analyzer.sglang.command_structure import (
    Argument,
    Canonical,
    CommandState,
    TakesValue,
    log_target,
    parse_state,
    pipeline,
)

# the options whose value is a model: a local folder or a Hub id
MODEL_PATH_FLAGS = ("--model-path", "--speculative-draft-model-path", "--tokenizer-path")
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

_EMBEDDED = re.compile(
    r"""(?:
        \b(?:[Cc]ommand|CMD|cmd)\s*[:=]\s*                                  # Command: ...
      | (?:^|:[ ]|\][+-]?[ ]+)\d*[ ]?(?:Killed|Terminated|Aborted|Segmentation[ ]fault)
        (?:[ ]\(core[ ]dumped\))?[ ]{2,}                                    # job status
    )""",
    re.X,
)


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
    _state: CommandState | None = field(default=None, repr=False, compare=False)

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

    def flag_before(self, word: str) -> str | None:
        """The flag typed right before a positional word (`--switch true`), if any."""
        if self._state is None:
            return None
        for tok in self._state.positionals:
            if tok.value == word:
                before = [s for s in self._state.slots if s.flag_tok.index < tok.index]
                return before[-1].arg.flag if before else None
        return None

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
        state = self._state or parse_state(self.original, None)
        if state is None:
            raise ValueError("not an SGLang launch command")
        for edit in edits:
            text = apply_splices(state.found, edit_splices(state, edit, canonical))
            new_state = parse_state(text, state.takes_value)
            if new_state is None:
                raise ValueError(f"edit {edit!r} produced an unparsable command")
            state = new_state
        return replace(_model(state), original=self.original)


def parse_launch_command(text: str, takes_value: TakesValue | None = None) -> LaunchCommand | None:
    """Parse a pasted command; None when it holds no SGLang launch."""
    state = parse_state(text, takes_value)
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
    if parse_state(command, None) is not None:
        return command
    # a command a wrapper printed after its own words: a launcher's `Command: ...` log
    # line, bash's job status `line 21: 88412 Killed    python -m ...`
    embedded = _EMBEDDED.search(line)
    if embedded is None:
        return None
    command = line[embedded.end() :]
    return command if parse_state(command, None) is not None else None


def _model(state: CommandState) -> LaunchCommand:
    found = state.found
    start, stop = found.entry
    contexts = [(found.level, found.cmd), *reversed(found.outer)]
    log_path = next((p for lv, c in contexts if (p := log_target(lv.cmds, c)) is not None), None)
    background = any(pipeline(lv.cmds, c)[-1].term == "&" for lv, c in contexts)
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

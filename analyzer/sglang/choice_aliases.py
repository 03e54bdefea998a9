"""The SGLang choice a value names under a library's or kernel's name.

The names come from SGLang's source (analyzer/sglang/choice_aliases_build.py wrote
analyzer/catalogs/choice_aliases.json): `flash-attention-3` is `fa3`, `TorchNativeAttention`
is `torch_native`, `float8_e4m3fn` is `fp8_e4m3`. A value maps only to a choice the flag
has, and only when it names exactly one of them.
"""

from __future__ import annotations

import json
import re
from functools import cache

from analyzer.core.package_files import package_files

# SGLang's names of a backend class carry these words; the value a user types may not
TRAILING = ("backend", "attention", "lora")


def choice_key(value: str) -> str:
    """A name with case, separators, `v` before a version and a trailing `backend` /
    `attention` left out (`attn` is SGLang's cut of `attention`)."""
    key = value.lower().replace("attn", "attention")
    key = re.sub(r"[^a-z0-9]+", "", key)
    key = re.sub(r"v(?=\d)", "", key)
    for word in TRAILING:
        if key.endswith(word) and len(key) > len(word):
            key = key[: -len(word)]
    return key


@cache
def mined_aliases() -> dict[str, tuple[str, ...]]:
    path = package_files("analyzer.catalogs").joinpath("choice_aliases.json")
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return {}
    return {name: tuple(aliases) for name, aliases in data.get("aliases", {}).items()}


def choice_named(value: str, choices: tuple) -> str | None:
    """The one choice `value` names: the same name up to case and separators, or a library
    or class name SGLang builds the choice from."""
    wanted = choice_key(value)
    if not wanted:
        return None
    same = [str(c) for c in choices if choice_key(str(c)) == wanted]
    if len(same) == 1:
        return same[0]
    aliases = mined_aliases()
    named = [
        str(c)
        for c in choices
        if any(choice_key(alias) == wanted for alias in aliases.get(str(c), ()))
    ]
    return named[0] if len(named) == 1 else None

"""JSON from inputs, parsed without unbounded recursion.

json's decoder recurses once per nesting level: a line of `[[[[...]]]]` 200,000 levels deep
raises RecursionError. Here that is a ValueError like any other malformed JSON, so every
reader's existing "not JSON: skip it" path takes it (and can say why).
"""

from __future__ import annotations

import json
from typing import Any


class JsonTooDeepError(ValueError):
    """JSON nested deeper than the interpreter's recursion limit lets json decode."""


def loads(text: str | bytes | bytearray) -> Any:
    """json.loads, a too deeply nested value raising JsonTooDeepError."""
    try:
        return json.loads(text)
    except RecursionError:
        raise JsonTooDeepError("JSON nested too deep to read") from None

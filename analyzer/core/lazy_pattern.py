"""A `regex` pattern compiled on first use.

`regex` compiles in Python, and compiling every pattern a module might need was most of
a small log's run time: most never meet a line they could match.
"""

from __future__ import annotations

import re
from typing import Any

import regex

_NAMED_GROUP = re.compile(r"\(\?P?<([A-Za-z_]\w*)>")
# bound onto the instance once compiled, so the hot path pays no extra call
_METHODS = ("search", "match", "fullmatch", "finditer", "findall", "sub", "subn", "split")


class LazyPattern:
    def __init__(self, source: str, flags: int = 0) -> None:
        self.pattern = source
        self.flags = flags
        self._compiled: regex.Pattern | None = None

    @property
    def compiled(self) -> regex.Pattern:
        if self._compiled is None:
            self._compiled = regex.compile(self.pattern, self.flags)
            for name in _METHODS:
                setattr(self, name, getattr(self._compiled, name))
        return self._compiled

    @property
    def group_names(self) -> set[str]:
        """The named groups, read from the source without compiling it."""
        return set(_NAMED_GROUP.findall(self.pattern))

    def search(self, text: str, *args: Any, **kwargs: Any) -> Any:
        return self.compiled.search(text, *args, **kwargs)

    def match(self, text: str, *args: Any, **kwargs: Any) -> Any:
        return self.compiled.match(text, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.compiled, name)

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, LazyPattern)
            and other.pattern == self.pattern
            and other.flags == self.flags
        )

    def __hash__(self) -> int:
        return hash(self.pattern)

    def __repr__(self) -> str:
        return f"LazyPattern({self.pattern!r})"

    def __reduce__(self) -> tuple[type, tuple[str, int]]:
        # pickled (core/parse_cache.py) as its source: a compiled pattern is not kept
        return (LazyPattern, (self.pattern, self.flags))

"""The project's TOML: one parser for rules and catalogs, shipped files kept parsed, and the
one writer of the values fixture sidecars hold.

tomli's compiled wheels parse about 3x faster than the standard library's tomllib (the
fallback); either is imported only when a file is really parsed, not when the parse
cache (core/parse_cache.py) already holds it.
"""

from __future__ import annotations

import json
from typing import Any

from analyzer.core.package_files import package_files
from analyzer.core.parse_cache import cached


class TomlError(ValueError):
    """Malformed TOML; the message is the parser's."""


def loads(text: str) -> dict[str, Any]:
    """TOML text to data (raises TomlError; RecursionError for nesting too deep to read)."""
    try:
        import tomli as parser
    except ImportError:  # pragma: no cover - a declared dependency
        import tomllib as parser
    try:
        return parser.loads(text)
    except parser.TOMLDecodeError as exc:
        raise TomlError(str(exc)) from None


def shipped_toml(package: str, name: str) -> dict[str, Any]:
    """The data of TOML file `name` shipped in `package`."""
    path = package_files(package).joinpath(name)
    return cached(f"toml-{name}", [path], lambda: loads(path.read_text("utf-8")))


def toml_value(value: object) -> str:
    """A TOML literal for the few value types the sidecars use."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")

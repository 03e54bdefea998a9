"""The server arguments a release resolves, derives or draws itself (built by
derived_fields_build.py from its source): what a command rebuilt from a
`server_args=ServerArgs(...)` record leaves out, since the user did not type them."""

from __future__ import annotations

import json
from functools import cache

from analyzer.core.model import Edit
from analyzer.core.package_files import package_files
from analyzer.sglang.catalog import FlagCatalog, version_key
from analyzer.sglang.launch_command import LaunchCommand

CATALOG_PACKAGE = "analyzer.catalogs"
PREFIX, SUFFIX = "derived-", ".json"


@cache
def shipped_derived_versions() -> tuple[str, ...]:
    names = [p.name for p in package_files(CATALOG_PACKAGE).iterdir()]
    found = [
        n[len(PREFIX) : -len(SUFFIX)] for n in names if n.startswith(PREFIX) and n.endswith(SUFFIX)
    ]
    return tuple(sorted(found, key=version_key))


@cache
def derived_fields(version: str | None) -> frozenset[str]:
    """The fields `version` may set itself (its own list, else the nearest older one, else
    the oldest shipped); with no known version, those of every shipped release."""
    versions = shipped_derived_versions()
    if version in versions:
        chosen = [version]
    elif version and any(ch.isdigit() for ch in version) and versions:
        older = [v for v in versions if version_key(v) <= version_key(version)]
        chosen = [older[-1] if older else versions[0]]
    else:
        chosen = list(versions)
    fields: set[str] = set()
    for name in chosen:
        path = package_files(CATALOG_PACKAGE).joinpath(f"{PREFIX}{name}{SUFFIX}")
        try:
            fields.update(json.loads(path.read_text("utf-8"))["fields"])
        except (OSError, ValueError, KeyError):
            continue
    return frozenset(fields)


def unknown_in_rebuilt(edits: list[Edit], command: LaunchCommand, catalog: FlagCatalog) -> bool:
    """Whether a check's finding on a command rebuilt from server_args rests on the absence
    of a flag the rebuilt command leaves out because SGLang may set it (its fix adds it):
    whether the user typed it is unknown, so its absence shows nothing."""
    derived = derived_fields(catalog.version)
    for edit in edits:
        spec = catalog.spec(edit.flag) if edit.op == "add" else None
        if spec is not None and spec.dest in derived and command.get(edit.flag) is None:
            return True
    return False

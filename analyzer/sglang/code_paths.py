"""SGLang's code-path map: the flags each function of a release reads.

`analyzer/sglang/code_paths_build.py` mines them from each release's source into
`catalogs/paths-VERSION.json`; this module loads one (on first use, once) and answers
`flags_read(frame_file, function)`. A log of a release older than every shipped map is
read with the oldest one: a function keeps its name and its settings across releases far
more often than its line numbers.
"""

from __future__ import annotations

from functools import cache

from analyzer.core import bounded_json
from analyzer.core.package_files import package_files
from analyzer.sglang.catalog import version_key

CATALOG_PACKAGE = "analyzer.catalogs"
PREFIX, SUFFIX = "paths-", ".json"
BACKSLASH = "\\"
# what a paste puts in place of a frame path's leading folders
ELIDED_HEADS = ("...", "…", "[...]")


class CodePaths:
    """`files`: `srt/...py` -> function -> the flags it reads (canonical in that release)."""

    def __init__(
        self, version: str, files: dict[str, dict[str, list[str]]], ubiquitous: list[str]
    ) -> None:
        self.version = version
        self.files = files
        self.ubiquitous = frozenset(ubiquitous)  # flags read all over srt: no feature's

    def flags_read(self, frame_file: str, function: str) -> list[str]:
        """The flags the function a traceback frame names reads (none for code outside
        sglang/srt, or a function the map leaves out)."""
        path = frame_file.replace(BACKSLASH, "/")
        at = path.rfind("sglang/srt/")
        if at < 0:
            return []
        functions = self.files.get(path[at + len("sglang/") :], {})
        return list(functions.get(function, ()))


@cache
def shipped_path_versions() -> tuple[str, ...]:
    names = [p.name for p in package_files(CATALOG_PACKAGE).iterdir()]
    found = [
        n[len(PREFIX) : -len(SUFFIX)] for n in names if n.startswith(PREFIX) and n.endswith(SUFFIX)
    ]
    return tuple(sorted(found, key=version_key))


@cache
def code_paths_for(version: str | None) -> CodePaths | None:
    """The map of `version` (its own, else the nearest older, else the oldest shipped)."""
    versions = shipped_path_versions()
    if not versions:
        return None
    chosen = versions[-1]
    if version is not None and version not in versions:
        older = [v for v in versions if version_key(v) <= version_key(version)]
        chosen = older[-1] if older else versions[0]
    elif version is not None:
        chosen = version
    path = package_files(CATALOG_PACKAGE).joinpath(f"{PREFIX}{chosen}{SUFFIX}")
    try:
        data = bounded_json.loads(path.read_text("utf-8"))
        return CodePaths(chosen, data["files"], data.get("ubiquitous", []))
    except (OSError, ValueError, KeyError):
        return None


@cache
def srt_files() -> frozenset[str]:
    """Every `srt/...py` file of the shipped maps (all releases): SGLang's own code."""
    found: set[str] = set()
    for version in shipped_path_versions():
        paths = code_paths_for(version)
        if paths is not None:
            found.update(paths.files)
    return frozenset(found)


def unelided_frame_file(frame_file: str) -> str:
    """A frame path whose head the paste elided (`.../models/longcat_flash.py`) read as
    SGLang's (`.../sglang/srt/models/longcat_flash.py`) when its tail, at least a folder and
    a file, is a file of SGLang's srt tree; any other path as it is."""
    path = frame_file.replace(BACKSLASH, "/")
    head, sep, tail = path.partition("/")
    if head not in ELIDED_HEADS or not sep or "/" not in tail or "sglang/" in tail:
        return frame_file
    return f"{head}/sglang/srt/{tail}" if f"srt/{tail}" in srt_files() else frame_file

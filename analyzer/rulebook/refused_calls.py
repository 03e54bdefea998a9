"""Calls Python refused by the callee's signature, judged by who called whom.

`TypeError: f() got an unexpected keyword argument 'x'` (or `missing N required positional
arguments`, `takes N positional arguments but M were given`, `got multiple values for
argument 'x'`) is raised before f runs: the innermost frame is the caller's (or a
decorator's wrapper in f's own package, `return func(*args, **kwargs)`). Since 3.10
CPython names f as `module.Qualname()` on the **kwargs path (_PyObject_FunctionStr),
else as `Qualname()`. Who wrote the caller and who wrote f tells the cause:
- a program calling SGLang's entry points: the program and SGLang are from different
  releases (`sglang_call`);
- SGLang calling a package it depends on (flashinfer, sgl_kernel, transformers, ...): the
  installed package is another version than the SGLang release was written against
  (`dependency_call`);
- SGLang calling its own code: SGLang's bug (`own_call`).
"""

from __future__ import annotations

import re

from analyzer.core.model import Frame, Match, ScannedLog
from analyzer.sglang.dependency_names import dependency_modules, packages_defining

SGLANG = "sglang"
SITE_DIRS = ("site-packages/", "dist-packages/")
# the modules programs embedding SGLang call into (sgl.Engine, its launcher): the shipped
# flag catalogs keep their functions' names per release (catalog_build.source_lines)
ENTRY_POINT_FILES = ("launch_server.py", "srt/entrypoints/engine.py", "srt/entrypoints/http_server.py")


def file_owner(path: str) -> str:
    """The top-level package a frame's file belongs to: `sglang`, an installed package's
    name, or "" for a program's own file."""
    path = path.replace("\\", "/")
    if f"/{SGLANG}/" in path:
        return SGLANG
    for site in SITE_DIRS:
        at = path.rfind(site)
        if at >= 0:
            return path[at + len(site) :].split("/")[0].removesuffix(".py")
    return ""


def callee_packages(match: Match) -> tuple[str, ...]:
    """The packages the refused function belongs to, by the name Python gives it, the
    names SGLang imports from its dependencies, or the module the call line names."""
    qualified = match.groups.get("qualified", "").rstrip(".")
    function = match.groups.get("function", "")
    parts = qualified.split(".") if qualified else []
    if parts and (parts[0] == SGLANG or parts[0] in dependency_modules()):
        return (parts[0],)  # `sglang.srt.server_args.ServerArgs()`
    if parts and packages_defining(parts[-1]):
        return packages_defining(parts[-1])  # `BatchPrefillWithPagedKVCacheWrapper.plan()`
    frames = match.traceback.frames if match.traceback is not None else ()
    code = frames[-1].code if frames else ""
    called = re.search(rf"(?<![\w.])((?:\w+\.)*){re.escape(function)}\(", code) if function else None
    if called is None:
        return ()
    module = called.group(1).split(".")[0]
    if module in dependency_modules():
        return (module,)  # `flashinfer.decode.trtllm_batch_decode(...)`
    if not called.group(1) and not parts:
        return packages_defining(function)  # a bare `rmsnorm(...)` SGLang imported
    return ()


def caller_frame(match: Match, callee: tuple[str, ...]) -> Frame | None:
    """The innermost frame outside the callee's package: the code that made the call."""
    frames = match.traceback.frames if match.traceback is not None else ()
    for frame in reversed(frames):
        if file_owner(frame.file) not in callee:
            return frame
    return None


def dependency_call(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """SGLang's code calling a package it depends on with arguments the installed version
    refuses."""
    callee = callee_packages(match)
    if not callee or SGLANG in callee:
        return None
    if _pasted_alone(match) and _named_class_of(match, callee):
        # `TypeError: BatchDecodeWithPagedKVCacheWrapper.plan() got an unexpected keyword
        # argument ...` alone: a class SGLang imports from the package, refusing SGLang's call
        return {"package": " or ".join(callee), "where": "code (its frames were not pasted)"}
    caller = caller_frame(match, callee)
    if caller is None or file_owner(caller.file) != SGLANG:
        return None
    path = caller.file.replace("\\", "/")
    return {
        "package": " or ".join(callee),
        "where": f"{caller.function} ({path[path.rfind('sglang/'):]}:{caller.lineno})",
    }


def _pasted_alone(match: Match) -> bool:
    return match.traceback is None or not match.traceback.frames


def _named_class_of(match: Match, callee: tuple[str, ...]) -> bool:
    """The refused function is a method of a class the packages define and SGLang imports
    (a bare function name alone could be anyone's)."""
    parts = match.groups.get("qualified", "").rstrip(".").split(".")
    return bool(parts[-1]) and set(packages_defining(parts[-1])) == set(callee)


def own_call(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """SGLang's code calling SGLang's own function with arguments it refuses."""
    if callee_packages(match) != (SGLANG,):
        return None
    caller = caller_frame(match, ())
    if caller is None or file_owner(caller.file) != SGLANG:
        return None
    path = caller.file.replace("\\", "/")
    return {"where": f"{caller.function} ({path[path.rfind('sglang/'):]}:{caller.lineno})"}


def sglang_call(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """A call's arguments refused where f is a function of SGLang's entry points in a
    shipped release and the call is not SGLang's own code: the caller was written for
    another release's signature."""
    function = match.groups.get("function", "")
    if not function or function.startswith("__"):
        return None
    frames = match.traceback.frames if match.traceback is not None else ()
    if frames and file_owner(frames[-1].file) == SGLANG:
        return None  # SGLang calling itself: its own bug, not a version pairing
    from analyzer.sglang.catalog import all_catalogs

    releases = [
        c.version
        for c in all_catalogs()
        if any(function in c.source_lines.get(f, {}) for f in ENTRY_POINT_FILES)
    ]
    if not releases:
        return None
    caller = frames[-1].file if frames else ""
    return {"releases": ", ".join(r for r in releases if r), "caller": caller}

"""Rule logic that weighs evidence across the whole input, not one line.

Like analyzer/rulebook/logic.py (whose LOGIC table names these too): each function takes
the raw Match and its ScannedLog and returns extra named groups, or None to veto the match.
"""

from __future__ import annotations

from analyzer.core.model import Match, ScannedLog


def first_report(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """One incident for an event every rank prints (and C++ `what():` echoes): the first
    line of the input that states the matched `event` stands for the later ones."""
    event = match.groups.get("event", "").casefold()
    number = match.line.number
    if event and any(
        line.number < number and event in line.body.casefold() for line in log.candidates
    ):
        return None
    return {}


# Python's name for a module body being executed: the frame of an `import`
MODULE_FRAME = "<module>"


def import_time(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """The exception was raised while one of SGLang's library modules was being imported:
    its innermost SGLang frame is a module body (`<module>`) in a subpackage (`srt/`,
    `kernels/`, ...) or a package `__init__.py`, not a script's own (`launch_server.py`,
    `bench_serving.py` at the top). Such code only defines things and registers them with,
    or probes, the installed packages and the GPU, so its failure is the environment's."""
    traceback = match.traceback
    if traceback is None:
        return None
    own = [(f.file.replace("\\", "/"), f) for f in traceback.frames]
    own = [(path, f) for path, f in own if "/sglang/" in path]
    if not own:
        return None
    path, frame = own[-1]
    module = path[path.rfind("sglang/") :]
    in_package = module.count("/") > 1 or module == "sglang/__init__.py"
    if frame.function != MODULE_FRAME or not in_package:
        return None
    return {"module": module, "lineno": str(frame.lineno)}

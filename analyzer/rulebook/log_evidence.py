"""Rule logic that weighs evidence across the whole input, not one line.

Like analyzer/rulebook/logic.py (whose LOGIC table names these too): each function takes
the raw Match and its ScannedLog and returns extra named groups, or None to veto the match.
"""

from __future__ import annotations

from analyzer.core.lazy_pattern import LazyPattern
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


# models/*.py load_weights: logger.warning(f"Parameter {name} not found in params_dict")
# (some models: "{name} not found in params_dict.", ", skip loading", "Audio param ...")
SKIPPED_WEIGHT = LazyPattern(r"(?P<key>[\w.]+) not found in params_dict")
# SGLang's own parameter names for a decoder's embedding and its first layer: a checkpoint
# whose tensors under these names are skipped was not loaded at all (extra tensors, such as
# an MTP layer or a vision tower the model class lacks, are skipped harmlessly).
CORE_WEIGHT = LazyPattern(r"(?:^|\.)(?:embed_tokens|layers\.0)\.")
MIN_SKIPPED_WEIGHTS = 3


def skipped_weights(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """The loader skipped checkpoint tensors it found no parameter for: a name mismatch when
    several are skipped, the embedding or the first decoder layer among them. Reported once,
    at the first skipped tensor."""
    skipped = [
        (line, found["key"])
        for line in log.candidates
        if (found := SKIPPED_WEIGHT.search(line.body))
    ]
    if not skipped or skipped[0][0].number != match.line.number:
        return None
    names = list(dict.fromkeys(key for _, key in skipped))
    if len(names) < MIN_SKIPPED_WEIGHTS or not any(CORE_WEIGHT.search(n) for n in names):
        return None
    return {"count": str(len(names)), "examples": ", ".join(names[:3])}


# Python's name for a module body being executed: the frame of an `import`
MODULE_FRAME = "<module>"


def import_time(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """The exception was raised while one of SGLang's library modules was being imported:
    its innermost SGLang frame is a module body (`<module>`) under `sglang/srt/` or a
    package `__init__.py`, not the launch script's own. Such code only runs definitions and
    registrations against the installed packages, so its failure is a version mismatch."""
    traceback = match.traceback
    if traceback is None:
        return None
    own = [(f.file.replace("\\", "/"), f) for f in traceback.frames]
    own = [(path, f) for path, f in own if "/sglang/" in path]
    if not own:
        return None
    path, frame = own[-1]
    library = "/sglang/srt/" in path or path.endswith("/__init__.py")
    if frame.function != MODULE_FRAME or not library:
        return None
    return {"module": path[path.rfind("sglang/") :], "lineno": str(frame.lineno)}

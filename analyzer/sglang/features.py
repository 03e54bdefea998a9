"""SGLang features as data: the flags an error names without naming a flag.

`analyzer/catalogs/features.toml` lists features with the flags that turn them on, what
SGLang's messages call them (`Currently HybridAttentionBackend does not support speculative
decoding.` names two) and the code that only runs with them on (a traceback through
`batch_invariant_ops/` ran with --enable-deterministic-inference). Read on first use.
Phrases link the text of a rule's flags group and any traceback's exception message;
frames any traceback's.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import cache

from analyzer.core.model import Frame, Traceback
from analyzer.core.toml_data import shipped_toml

FEATURES_PACKAGE, FEATURES_FILE = "analyzer.catalogs", "features.toml"
KNOWN_KEYS = {
    "flags", "phrases", "frames", "inside", "caller", "calls", "phase", "when_set", "source",
}  # fmt: skip
BACKSLASH = "\\"  # Windows paths in a pasted traceback
SGLANG_CODE = "sglang/srt/"


@dataclass(frozen=True)
class Feature:
    """A feature of SGLang: its flags, and the phrases and frames that show it ran."""

    flags: tuple[str, ...]
    phrases: tuple[str, ...] = ()
    frames: tuple[str, ...] = ()
    inside: tuple[str, ...] = ()
    source: str = ""
    when_set: bool = False  # its frames blame its flags only when the command sets them
    caller: tuple[str, ...] = ()  # the nearest SGLang frame above its frame holds one of these
    calls: tuple[str, ...] = ()  # the nearest SGLang frame below it, if shown, holds one
    phase: str | None = None  # the frame phase (frame_phases.toml) its code only runs in

    def ran_in(self, frames: list[Frame]) -> bool:
        """Whether a frame is this feature's code (below an `inside` frame, if any)."""
        return self.frame_in(frames) is not None

    def frame_in(self, frames: list[Frame]) -> Frame | None:
        """The first frame of this feature's code (below an `inside` frame, if any; called
        by a `caller` and calling a `calls` frame, if given), else None."""
        texts = [f"{f.file.replace(BACKSLASH, '/')} {f.function}" for f in frames]
        outer = 0
        if self.inside:
            outer = next((i for i, t in enumerate(texts) if _holds(t, self.inside)), -1)
            if outer < 0:
                return None
        for index in range(outer, len(texts)):
            if _holds(texts[index], self.frames) and self._wrapped(texts, index):
                return frames[index]
        return None

    def _wrapped(self, texts: list[str], index: int) -> bool:
        """The SGLang code next to the frame at `index` is what `caller` / `calls` say."""
        if self.caller:
            above = next((t for t in reversed(texts[:index]) if SGLANG_CODE in t), None)
            if above is None or not _holds(above, self.caller):
                return False
        if self.calls:
            below = next((t for t in texts[index + 1 :] if SGLANG_CODE in t), None)
            if below is not None and not _holds(below, self.calls):
                return False
        return True


def _holds(text: str, needles: tuple[str, ...]) -> bool:
    return any(needle in text for needle in needles)


@cache
def features() -> tuple[Feature, ...]:
    entries = shipped_toml(FEATURES_PACKAGE, FEATURES_FILE).get("feature", [])
    found = []
    for entry in entries:
        unknown = set(entry) - KNOWN_KEYS
        if unknown or not entry.get("flags") or not (entry.get("phrases") or entry.get("frames")):
            raise ValueError(f"{FEATURES_FILE}: bad feature entry {entry}")
        found.append(
            Feature(
                tuple(entry["flags"]),
                tuple(p.lower() for p in entry.get("phrases", ())),
                tuple(entry.get("frames", ())),
                tuple(entry.get("inside", ())),
                entry.get("source", ""),
                bool(entry.get("when_set", False)),
                tuple(entry.get("caller", ())),
                tuple(entry.get("calls", ())),
                entry.get("phase"),
            )
        )
    return tuple(found)


@cache
def _phrase_pattern() -> re.Pattern[str] | None:
    phrases = sorted({p for f in features() for p in f.phrases}, key=len, reverse=True)
    if not phrases:
        return None
    return re.compile(r"(?<![a-z0-9])(?:" + "|".join(map(re.escape, phrases)) + ")")


# "If using speculative decoding, draft weights are now counted." (kv_cache_configurator):
# a hint for the case the feature is on, no sign that it was
CONDITIONAL = re.compile(r"(?:\bif|\bwhen) (?:you (?:are )?)?(?:using|use) $")


def named_features(text: str) -> list[Feature]:
    """The features `text` names, in the order it names them (not those it names only in a
    conditional hint)."""
    pattern = _phrase_pattern()
    if pattern is None or not text:
        return []
    lowered = text.lower()
    named = [
        m.group(0)
        for m in pattern.finditer(lowered)
        if not CONDITIONAL.search(lowered, max(0, m.start() - 24), m.start())
    ]
    found = [feature for phrase in named for feature in features() if phrase in feature.phrases]
    return list(dict.fromkeys(found))


def phrase_flags(text: str) -> list[str]:
    """The flags of the features `text` names, in the order it names them."""
    return _unique(flag for feature in named_features(text) for flag in feature.flags)


def frame_flags(traceback: Traceback | None, when_set: bool = False) -> list[str]:
    """The flags of the features whose code a traceback (or a chained cause) ran through:
    those whose code runs only with them on, or (`when_set`) those whose code also runs
    without them (torch.compile's, which SGLang's own decorators use too), for the caller
    to keep when the command sets them."""
    if traceback is None:
        return []
    parts = (traceback, *traceback.chain)
    return _unique(
        flag
        for feature in features()
        if feature.frames
        and feature.when_set == when_set
        and any(feature.ran_in(list(p.frames)) for p in parts)
        for flag in feature.flags
    )


def feature_phase(traceback: Traceback) -> tuple[str, Frame] | None:
    """The frame phase a traceback (or a chained cause) was in by the code of a feature that
    only runs inside one (SGLang's torch.compile of the model only runs while capturing),
    with the feature's frame."""
    for feature in features():
        if feature.phase is None:
            continue
        for part in (traceback, *traceback.chain):
            frame = feature.frame_in(list(part.frames))
            if frame is not None:
                return feature.phase, frame
    return None


def traceback_flags(
    traceback: Traceback | None, possible: Callable[[str], bool] | None = None
) -> list[str]:
    """The features a traceback ran through, then those its exception messages name.
    `possible`: whether the launch command leaves a flag possibly on; a feature's code that
    runs only with its flag set names no flag the command leaves off (pipeline.py)."""
    if traceback is None:
        return []
    ran = [f for f in frame_flags(traceback) if possible is None or possible(f)]
    named = (f for p in (traceback, *traceback.chain) for f in phrase_flags(p.exception_message))
    return _unique([*ran, *named])


def _unique(flags: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(flags))

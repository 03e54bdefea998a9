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
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache

from analyzer.core.model import Frame, Traceback
from analyzer.core.toml_data import shipped_toml

FEATURES_PACKAGE, FEATURES_FILE = "analyzer.catalogs", "features.toml"
KNOWN_KEYS = {"flags", "phrases", "frames", "inside", "when_set", "source"}
BACKSLASH = "\\"  # Windows paths in a pasted traceback


@dataclass(frozen=True)
class Feature:
    """A feature of SGLang: its flags, and the phrases and frames that show it ran."""

    flags: tuple[str, ...]
    phrases: tuple[str, ...] = ()
    frames: tuple[str, ...] = ()
    inside: tuple[str, ...] = ()
    source: str = ""
    when_set: bool = False  # its frames blame its flags only when the command sets them

    def ran_in(self, frames: list[Frame]) -> bool:
        """Whether a frame is this feature's code (below an `inside` frame, if any)."""
        texts = [f"{f.file.replace(BACKSLASH, '/')} {f.function}" for f in frames]
        outer = 0
        if self.inside:
            outer = next((i for i, t in enumerate(texts) if _holds(t, self.inside)), -1)
            if outer < 0:
                return False
        return any(_holds(text, self.frames) for text in texts[outer:])


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


def traceback_flags(traceback: Traceback | None) -> list[str]:
    """The features a traceback ran through, then those its exception messages name."""
    if traceback is None:
        return []
    named = (f for p in (traceback, *traceback.chain) for f in phrase_flags(p.exception_message))
    return _unique([*frame_flags(traceback), *named])


def _unique(flags: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(flags))

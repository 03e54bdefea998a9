"""LazyPattern answers exactly as the compiled pattern does, compiled or not yet."""

from __future__ import annotations

import gc
import random
from pathlib import Path

import pytest
import regex

from analyzer.core.lazy_pattern import LazyPattern, required_opening
from analyzer.rulebook.vocabulary import load_rules

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize(
    ("source", "openings"),
    [
        (r"^KeyError: '(?P<key>[\w.]+)'$", ("KeyError: '",)),
        (
            r"mat1 and mat2 shapes cannot be multiplied \(\d+x",
            ("mat1 and mat2 shapes cannot be multiplied (",),
        ),
        ("OutOfMemoryError", ("OutOfMemoryError",)),
        ("abcd*", ("abc",)),  # a quantified character is not required
        ("abcd{2}", ("abc",)),
        (r"foo\.bar\d", ("foo.bar",)),
        ("(?i)CUDA out of memory", None),  # case-insensitive: the letters are not literal
        ("CUDA (?i:out) of memory", None),
        ("abc(?x) d e f", None),
        ("abc|def", ("abc", "def")),  # one of the branches
        ("abc|d", None),  # a branch too short to tell
        (r"abc\\|def", ("abc\\", "def")),
        ("abcdef[|]x", ("abcdef",)),  # `|` inside a set is a member
        ("abc[[:alpha:]|]", None),
        (r"^(?P<kind>ValueError|TypeError): x", ("TypeError", "ValueError")),
        (r"^(?:Value|Type)Error|^KeyError", ("KeyError", "Type", "Value")),
        (r"^(?:\w*Error|KeyError): x", None),  # a branch opens with nothing sure
        (r"\bword here", None),
        ("ab", None),  # too short to be worth it
        ("abc(def", None),  # unbalanced: not trusted
        ("abc)def", None),
        (
            r"(?P<detail>Received sigquit from a child proces)s?",
            ("Received sigquit from a child proces",),
        ),
        (r"pre(?P<x>fix (?:here|there))", ("prefix here", "prefix there")),
        ("pre(?P<x>fix (?:here|.there))", ("prefix ",)),
        ("(?P<a>abc)?def", None),  # an optional group
        ("(?:abcd)+", None),
        ("(?=abcd)abcd", None),  # a lookahead matches nothing
        ("(?<=abc)defg", None),
        (r"(?:abc\)d)e", ("abc)d",)),
    ],
)
def test_required_opening(source: str, openings: tuple[str, ...] | None):
    assert required_opening(source) == openings


def _patterns() -> list[str]:
    """Every shipped rule pattern and every LazyPattern the analyzer's modules create."""
    found = set()
    for rule in load_rules():
        found.update(
            p.pattern for p in (*rule.patterns, *rule.frameless, rule.frame, rule.code) if p
        )
    found.update(o.pattern for o in gc.get_objects() if isinstance(o, LazyPattern) and not o.flags)
    return sorted(found)


def _texts() -> list[str]:
    lines = []
    for path in sorted((ROOT / "fixtures" / "real").glob("*.log")):
        lines.extend(path.read_text("utf-8", errors="replace").splitlines())
    return lines


def test_prefiltered_answers_equal_the_compiled_ones():
    import analyzer.pipeline  # noqa: F401 - creates the modules' patterns

    texts = _texts()
    random.seed(17)
    for source in _patterns():
        openings = required_opening(source)
        if openings is None:
            continue
        compiled = regex.compile(source)
        sample = [t for t in texts if any(o in t for o in openings)] + random.sample(texts, 200)
        for opening in openings:
            sample += [opening, opening + " tail", "x" + opening, opening[:-1]]
        for text in sample:
            lazy = LazyPattern(source)  # a fresh one: never compiled before this call
            assert bool(lazy.search(text)) == bool(compiled.search(text)), (source, text)
            assert bool(LazyPattern(source).match(text)) == bool(compiled.match(text))


def test_a_text_without_the_opening_compiles_nothing():
    pattern = LazyPattern(r"^ValueError: Unknown speculative algorithm name: (?P<hl>\S+)$")
    assert pattern.search("RuntimeError: CUDA error") is None
    assert pattern.match("RuntimeError: CUDA error", timeout=1.0) is None
    assert pattern._compiled is None
    found = pattern.search("ValueError: Unknown speculative algorithm name: EAGLE9")
    assert found["hl"] == "EAGLE9"
    assert pattern._compiled is not None

"""The last resort of a repair: a flag dropped, and what the user loses with it, in words.

A removal is offered only when SGLang's flag history, its word vocabulary and its choices
show no counterpart (analyzer/repair/fixes.py tries them first). The edit then carries
`intent_lost` (the JSON's `"intent_lost": true`) and the advice says what stops happening:
"speculative decoding will be off", "expert parallelism will not be enabled".
"""

from __future__ import annotations

from analyzer.core.model import Edit
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.flag_words import initials_spelled, words

SPECULATIVE = ("--speculative-algorithm", "--speculative-draft-model-path")
SPECULATIVE_WORDS = ("speculative", "spec", "specul")
ALGORITHM_WORDS = ("algorithm", "algo", "method", "mode")


def dropped(flag: str, value: str | None, catalog: FlagCatalog) -> tuple[Edit, str]:
    """The removal of `flag` and the sentence that names what is lost."""
    return Edit("remove", flag, intent_lost=True), lost_in_words(flag, value, catalog)


def lost_in_words(flag: str, value: str | None, catalog: FlagCatalog) -> str:
    spec = catalog.spec(flag)
    name = spec.long if spec else flag.split("=", 1)[0]
    said = f"{name} {value}" if value is not None else name
    typed = words(name)
    if name in SPECULATIVE or (
        set(typed) & set(SPECULATIVE_WORDS) and set(typed) & set(ALGORITHM_WORDS)
    ):
        return f"dropping {said}: speculative decoding will be off"
    subject = " ".join(_spelled_out(typed[1:], catalog)) if typed else name
    if typed and typed[0] == "enable":
        return f"dropping {said}: {subject} will not be enabled"
    if typed and typed[0] == "disable":
        return f"dropping {said}: {subject} stays as SGLang's default has it"
    if spec is not None and spec.takes_value and spec.default is not None:
        return f"dropping {said}: SGLang uses its default ({spec.default}) instead"
    if spec is not None and spec.takes_value:
        return f"dropping {said}: SGLang chooses the {' '.join(typed)} itself"
    return f"dropping {said}: what it asked for is lost (SGLang has no counterpart)"


def _spelled_out(cut: tuple[str, ...], catalog: FlagCatalog) -> list[str]:
    """Words with SGLang's initials spelled out where its own aliases pair them
    (`ep` -> `expert parallelism`, from `--ep-size` / `--expert-parallel-size`)."""
    pairs = initials_spelled(catalog)
    return [_noun(pairs[w]) if w in pairs else w for w in cut]


def _noun(phrase: str) -> str:
    return phrase + "ism" if phrase.endswith(" parallel") else phrase

"""SGLang's own words: an option written with a word cut or spelled out the other way.

SGLang's option names abbreviate some words (`--attn-dp-size`, `--mem-fraction-static`,
`--cuda-graph-max-bs`, `--tp-size`) and spell out others (`--speculative-*`,
`--max-running-requests`); users guess the other form (`--attention-dp-size`,
`--spec-algorithm`, `--max-running-reqs`). A typed name whose words line up with one
option's words, each the same, a cut of it (`spec`, `attn`, `reqs`: the letters in order,
same first letter) or the initials of several (`bs` for `batch size`, `tp` for `tensor
parallel`, as SGLang's own aliases pair them), names that option. The words are the
catalog's (generated from SGLang's parser), so no list of abbreviations is kept here.
"""

from __future__ import annotations

import re
from functools import lru_cache
from weakref import WeakKeyDictionary

from analyzer.sglang.catalog import FlagCatalog

MIN_CUT = 2  # a cut keeps at least this many letters


def words(flag: str) -> tuple[str, ...]:
    return tuple(w for w in re.split(r"[-_]+", flag.lower().lstrip("-")) if w)


def cut_of(short: str, long: str) -> bool:
    """`short` is `long` with letters left out: same first letter, the rest in order."""
    if len(short) < MIN_CUT or len(short) >= len(long) or short[0] != long[0]:
        return False
    letters = iter(long)
    return all(c in letters for c in short)


def _initials(run: tuple[str, ...]) -> str:
    return "".join(w[0] for w in run)


@lru_cache(maxsize=4096)
def _cost(typed: tuple[str, ...], option: tuple[str, ...]) -> int | None:
    """Words changed to line `typed` up with `option` (None: they do not line up)."""
    if not typed or not option:
        return 0 if typed == option else None
    best: int | None = None

    def keep(found: int | None, extra: int) -> None:
        nonlocal best
        if found is not None and (best is None or found + extra < best):
            best = found + extra

    head, other = typed[0], option[0]
    if head == other:
        keep(_cost(typed[1:], option[1:]), 0)
    elif cut_of(head, other) or cut_of(other, head):
        keep(_cost(typed[1:], option[1:]), 1)
    for size in range(2, 4):
        if len(option) >= size and head == _initials(option[:size]):
            keep(_cost(typed[1:], option[size:]), 1)
        if len(typed) >= size and other == _initials(typed[:size]):
            keep(_cost(typed[size:], option[1:]), 1)
    return best


def option_in_other_words(typed: str, catalog: FlagCatalog) -> str | None:
    """The one option of `catalog` that `typed` names in other words, if exactly one does."""
    wanted = words(typed.split("=", 1)[0])
    if not wanted:
        return None
    scored: dict[str, tuple[int, str]] = {}
    for spec in catalog.specs:
        for option in spec.option_strings:
            if not option.startswith("--"):
                continue
            cost = _cost(wanted, words(option))
            if cost is None or cost == 0:
                continue
            if spec.dest not in scored or cost < scored[spec.dest][0]:
                scored[spec.dest] = (cost, spec.long)
    if not scored:
        return None
    least = min(cost for cost, _ in scored.values())
    best = [long for cost, long in scored.values() if cost == least]
    return best[0] if len(best) == 1 else None


_SPELLED: WeakKeyDictionary[FlagCatalog, dict[str, str]] = WeakKeyDictionary()


def initials_spelled(catalog: FlagCatalog) -> dict[str, str]:
    """Initials SGLang's own aliases spell out: `ep` -> `expert parallel` (`--ep-size` is
    also `--expert-parallel-size`)."""
    found = _SPELLED.get(catalog)
    if found is None:
        found = _SPELLED[catalog] = _read_initials(catalog)
    return found


def _read_initials(catalog: FlagCatalog) -> dict[str, str]:
    found: dict[str, str] = {}
    for spec in catalog.specs:
        spellings = [words(o) for o in spec.option_strings if o.startswith("--")]
        for short in spellings:
            for long in spellings:
                extra = len(long) - len(short)
                if extra < 1 or short[1:] != long[extra + 1 :]:
                    continue
                run = long[: extra + 1]
                if short[0] == _initials(run):
                    found.setdefault(short[0], " ".join(run))
    return found

"""A retired `--enable-...` switch whose job an option of SGLang does now.

SGLang retired several switches into valued options: `--enable-dp-attention` into
`--attn-dp-size <dp-size>` (its 0.5.23 deprecation text), `--enable-ep-moe` into `--ep-size`
(the same degree as `--tp-size`: "if enable_ep_moe tp_size == ep_size", models/deepseek_v2.py),
`--enable-flashinfer-mla` into `--attention-backend flashinfer`. Read with SGLang's own words
(analyzer/sglang/flag_words.py, choice_aliases.py), an unknown switch names:

- a parallel degree: `--enable-<w>-...` where `--<w>-size` is one of SGLang's sizes whose
  aliases spell `<w>` out as "... parallel": the degree across the tensor-parallel GPUs;
- a choice: a word of the switch is a choice of exactly one choice option whose other
  choices hold the switch's remaining words (`flashinfer` + `mla`: --attention-backend).
"""

from __future__ import annotations

from analyzer.core.model import Edit
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.choice_aliases import choice_named
from analyzer.sglang.flag_words import initials_spelled, words
from analyzer.sglang.launch_command import LaunchCommand

SWITCH_ON = "enable"


Counterpart = tuple[Edit, str]


def switch_counterpart(
    flag: str, command: LaunchCommand, catalog: FlagCatalog, tp: int | None
) -> Counterpart | None:
    """The valued option an unknown `--enable-...` switch stands for (the edit and why),
    given the command's tensor-parallel size `tp`."""
    typed = words(flag)
    if len(typed) < 2 or typed[0] != SWITCH_ON or command.get(flag) is not None:
        return None
    typed_options = {catalog.canonical(a.flag) for a in command.arguments}
    found = _degree(flag, typed[1:], catalog, tp) or _choice(flag, typed[1:], catalog)
    if found is None or found[0].to in typed_options:
        return None
    return found


def _degree(
    flag: str, named: tuple[str, ...], catalog: FlagCatalog, tp: int | None
) -> Counterpart | None:
    spelled = initials_spelled(catalog)
    word = named[0]
    option = f"--{word}-size"
    spec = catalog.spec(option)
    if not spelled.get(word, "").endswith("parallel") or spec is None or spec.long != option:
        return None
    if tp is None or tp <= 1:
        return None  # one GPU: no degree to spread over; the caller drops it and says so
    note = (
        f"{flag} turned {spelled[word]}ism on across the tensor-parallel GPUs; in SGLang "
        f"that is {option} {tp} (the same degree as --tp-size)"
    )
    return Edit("rename", flag, to=option, value=str(tp)), note


def _choice(flag: str, named: tuple[str, ...], catalog: FlagCatalog) -> Counterpart | None:
    found: list[tuple[str, str]] = []
    for spec in catalog.specs:
        if not spec.choices or not spec.long.startswith("--"):
            continue
        choices = tuple(str(c) for c in spec.choices)
        for index, word in enumerate(named):
            choice = choice_named(word, choices)
            rest = [w for i, w in enumerate(named) if i != index]
            # the switch's other words: the option's own name or its other choices
            others = {w for c in choices if c != choice for w in words(c)} | set(words(spec.long))
            if choice is not None and all(w in others for w in rest):
                found.append((spec.long, choice))
    # --attention-backend over --prefill-attention-backend: the option the others refine
    general = [
        (option, choice)
        for option, choice in found
        if all(set(words(option)) <= set(words(other)) for other, _ in found)
    ]
    if len(general) != 1 or len({choice for _, choice in found}) != 1:
        return None
    option, choice = general[0]
    note = f"{flag} chose {choice}; in SGLang that is {option} {choice}"
    return Edit("rename", flag, to=option, value=choice), note

"""What SGLang would reject in a launch command, predicted without running it, each problem
with the fix the project proposes for it.

Three kinds of check, in the order SGLang runs them: its parser (unknown, ambiguous,
mistyped flags, a switch given a value, a missing value or required flag, phrased as
argparse says them so the same fixes parse them), the speculative settings resolution
needs (the algorithm's spelling, the steps/topk/draft-tokens trio), and the error
catalog's raise/assert sites whose condition reads only flags the command sets
(`conditions.py`). Pre-flight (`loganalyze run`) and the repair search
(analyzer/repair/search.py) both ask this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from analyzer.core.model import Edit, Finding, Line, Match, Traceback
from analyzer.repair.conditions import failing_sites
from analyzer.repair.fix_registry import FIXES
from analyzer.repair.fixes import FixContext, FixPlan, late_choices
from analyzer.sglang.catalog import FlagCatalog, FlagSpec
from analyzer.sglang.error_catalog import ErrorCatalog, ErrorSite
from analyzer.sglang.launch_command import LaunchCommand
from analyzer.sglang.releases import package_path

EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE")
FALSE_WORDS = ("false", "no", "off", "0")
TRUE_WORDS = ("true", "yes", "on", "1")


@dataclass
class Predicted:
    """One problem SGLang would stop at: which check, its words, its flags, the fix."""

    check: str  # flags | speculative | model | condition
    message: str
    flags: list[str]
    plan: FixPlan = field(default_factory=FixPlan)
    site: ErrorSite | None = None
    raises: str = ""  # the exception SGLang stops with, when the check is known to raise one


def predict(
    command: LaunchCommand, catalog: FlagCatalog, errors: ErrorCatalog | None = None
) -> list[Predicted]:
    """Every problem found, parser first (argparse stops there, so the rest wait for it)."""
    found = flag_problems(command, catalog)
    if found:
        return found
    found = speculative_problems(command, catalog)
    found += context_problems(command, catalog)
    if errors is not None:
        found += condition_problems(command, catalog, errors)
    return found


# ---- the parser --------------------------------------------------------------------------


def flag_problems(command: LaunchCommand, catalog: FlagCatalog) -> list[Predicted]:
    """Every argument argparse would reject, as argparse would say it, through its fix."""
    found: list[Predicted] = []
    unknown = []
    for argument in command.arguments:
        resolution = catalog.resolve(argument.flag)
        if resolution.kind == "ambiguous":
            matches = ", ".join(resolution.candidates)
            message = f"ambiguous option: {argument.flag} could match {matches}"
            found.append(
                _through("fix_invalid_value", "flags", message, [argument.flag], command, catalog)
            )
        elif resolution.spec is None:
            unknown.append(argument.flag)
        elif catalog.check_value(argument.flag, argument.value):
            message = value_error(resolution.spec, argument.value)
            flags = [resolution.spec.long]
            if resolution.spec.takes_value:
                found.append(
                    _through("fix_invalid_value", "flags", message, flags, command, catalog)
                )
            else:
                found.append(
                    Predicted(
                        "flags", message, flags, switch_plan(argument.flag, argument.value or "")
                    )
                )
    missing = [
        spec
        for spec in catalog.specs
        if spec.required and not any(catalog.spec(a.flag) is spec for a in command.arguments)
    ]
    for spec in missing:
        message = "the following arguments are required: " + "/".join(spec.option_strings)
        found.append(_through("fix_invalid_value", "flags", message, [spec.long], command, catalog))
    # with a required flag missing, its fix reads a lone positional as that flag's value
    stray = [] if missing else command.positionals
    if unknown or stray:
        message = "unrecognized arguments: " + " ".join([*unknown, *stray])
        if unknown:
            found.append(
                _through("rename_unrecognized", "flags", message, unknown, command, catalog)
            )
        else:
            found.append(Predicted("flags", message, [], _stray_plan(command, catalog, stray)))
    return found


def value_error(spec: FlagSpec, value: str | None) -> str:
    """argparse's own wording for a value it rejects (the fixes parse that wording)."""
    name = "/".join(spec.option_strings)
    if not spec.takes_value:
        return f"argument {name}: ignored explicit argument {value!r}"
    if value is None:
        return f"argument {name}: expected one argument"
    if spec.type in ("int", "float") and not _number(value, spec.type):
        return f"argument {name}: invalid {spec.type} value: {value!r}"
    choices = ", ".join(repr(c) for c in spec.choices or ())
    return f"argument {name}: invalid choice: {value!r} (choose from {choices})"


def _number(value: str, kind: str) -> bool:
    try:
        (int if kind == "int" else float)(value)
    except ValueError:
        return False
    return True


def switch_plan(flag: str, value: str) -> FixPlan:
    """`--switch=VALUE`: a switch takes no value; `false` means leave it out."""
    if value.lower() in FALSE_WORDS:
        return FixPlan([Edit("remove", flag)], [f"{flag} is a switch: leave it out to keep it off"])
    return FixPlan(
        [Edit("set", flag, value=None)], [f"{flag} is a switch: give it without a value"]
    )


def _stray_plan(command: LaunchCommand, catalog: FlagCatalog, stray: list[str]) -> FixPlan:
    """`--switch true`: argparse takes the word after a switch as a stray positional."""
    plan = FixPlan()
    for word in stray:
        flag = command.flag_before(word)
        spec = catalog.spec(flag) if flag else None
        if spec is None or spec.takes_value or word.lower() not in (*FALSE_WORDS, *TRUE_WORDS):
            continue
        plan.edits.append(Edit("remove", word))
        if word.lower() in FALSE_WORDS:
            plan.edits.append(Edit("remove", spec.long))
        plan.notes.append(f"{spec.long} is a switch: {word!r} after it is a stray argument")
    return plan


# ---- speculative decoding ----------------------------------------------------------------


def speculative_problems(command: LaunchCommand, catalog: FlagCatalog) -> list[Predicted]:
    """The algorithm's spelling and the steps/topk/draft-tokens trio SGLang needs complete.

    sglang 0.5.23 `_handle_eagle_family`: without --speculative-num-steps it asserts topk and
    draft tokens are unset too (a bare AssertionError); steps without topk compares None > 1
    (a TypeError). Both happen after the imports, seconds to minutes into the launch.
    """
    values = typed_values(command, catalog)
    algorithm = values.get("--speculative-algorithm")
    if algorithm is None:
        return []
    ctx = FixContext(command, catalog)
    known = late_choices("--speculative-algorithm")
    flags = ["--speculative-algorithm"]
    if known and algorithm.upper() not in known:
        message = f"unknown speculative algorithm {algorithm!r} (SGLang knows {', '.join(known)})"
        finding = synthetic_finding(message, flags, {"value": algorithm})
        return [Predicted("speculative", message, flags, FIXES["respell_algorithm"](finding, ctx))]
    if algorithm.upper() not in EAGLE_FAMILY or "--speculative-adaptive" in values:
        return []
    steps = values.get("--speculative-num-steps")
    given = [
        f for f in ("--speculative-eagle-topk", "--speculative-num-draft-tokens") if f in values
    ]
    if steps is None and given:
        raises = "AssertionError"
        message = (
            f"{' and '.join(given)} without --speculative-num-steps: SGLang {catalog.version} "
            "stops with a bare AssertionError in argument resolution"
        )
    elif steps is not None and "--speculative-eagle-topk" not in values:
        raises = "TypeError"
        message = (
            "--speculative-num-steps without --speculative-eagle-topk: SGLang "
            f"{catalog.version} stops with a TypeError in argument resolution"
        )
    else:
        return []
    trio = ["--speculative-num-steps", *given]
    plan = FIXES["complete_speculative"](synthetic_finding(message, []), ctx)
    return [Predicted("speculative", message, trio, plan, raises=raises)]


# SGLang's argument resolution: launch_server's prepare_server_args, ServerArgs.__post_init__
# and (0.5.2x) the arg_groups hooks it calls; the trio check runs there
ARGUMENT_RESOLUTION = ("launch_server.py", "srt/server_args.py", "srt/arg_groups/")


def predicted_by_command(
    traceback: Traceback, command: LaunchCommand, catalog: FlagCatalog
) -> Predicted | None:
    """The speculative problem the shown command predicts, when the traceback no rule
    explains is what SGLang raises for it: a bare AssertionError, or the TypeError on None,
    whose SGLang frames (if any were pasted) are all argument resolution. A paste often cuts
    the frame that names the check (`_handle_eagle_family`); the command still shows it."""
    if traceback.exception_type not in ("AssertionError", "TypeError"):
        return None
    message = traceback.exception_message.strip()
    if traceback.exception_type == "AssertionError" and message:
        return None  # the trio's assertion is bare; one with words is another check
    if traceback.exception_type == "TypeError" and "NoneType" not in message:
        return None
    paths = [package_path(f.file) for f in traceback.frames]
    if any(p is not None and not p.startswith(ARGUMENT_RESOLUTION) for p in paths):
        return None
    found = speculative_problems(command, catalog)
    return next((p for p in found if p.raises == traceback.exception_type), None)


def predicted_match(predicted: Predicted, traceback: Traceback) -> Match:
    """The match of SGLang's own rule for the check the command predicts (`spec-assertion`,
    `spec-type-error`) on the exception line, with the groups its failing source line would
    have given: the flags of the trio and what the command shows."""
    assertion = predicted.raises == "AssertionError"
    rule_id = "spec-assertion" if assertion else "spec-type-error"
    line = traceback.exception_line
    groups = {
        # the checks as 0.5.23 writes them (arg_groups/speculative_hook.py _handle_eagle_family)
        "check": (
            "speculative_eagle_topk is None and speculative_num_draft_tokens is None"
            if assertion
            else "speculative_eagle_topk > 1"
        ),
        "check_flags": " ".join(predicted.flags),
        "check_meaning": f"The launch command shown predicts it: {predicted.message}.",
        "message": traceback.exception_message.strip(),
    }
    evidence = tuple({ln.number: ln for ln in (traceback.first, line)}.values())
    ranks = (line.rank_label,) if line.rank_label else ()
    return Match(rule_id, line, None, groups, evidence, ranks, traceback)


def typed_values(command: LaunchCommand, catalog: FlagCatalog) -> dict[str, str]:
    """Canonical flag -> value as typed (last one wins, `true` for a bare switch)."""
    values: dict[str, str] = {}
    for argument in command.arguments:
        flag = catalog.canonical(argument.flag)
        if flag:
            values[flag] = argument.value if argument.value is not None else "true"
    return values


# ---- the model's own limits -------------------------------------------------------------

# sglang 0.5.23 utils/hf_transformers/common.py CONTEXT_LENGTH_KEYS, in its order
CONTEXT_LENGTH_KEYS = (
    "max_sequence_length", "seq_length", "max_seq_len", "model_max_length",
    "max_position_embeddings",
)  # fmt: skip
DEFAULT_CONTEXT = 2048


def context_problems(command: LaunchCommand, catalog: FlagCatalog) -> list[Predicted]:
    """A --context-length above the local model's: configs/model_config.py
    _derive_context_length raises `User-specified context_length (N) is greater than the
    derived context_length (M)` (unless SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN is set)."""
    values = typed_values(command, catalog)
    given, path = values.get("--context-length"), values.get("--model-path")
    derived = derived_context_length(Path(path)) if path else None
    if derived is None or given is None or not given.isdigit() or int(given) <= derived:
        return []
    message = (
        f"ValueError: Warning: User-specified context_length ({given}) is greater than the "
        f"derived context_length ({derived})"
    )
    flags = ["--context-length"]
    finding = synthetic_finding(message, flags, {"message": message})
    plan = FIXES["respect_bound"](finding, FixContext(command, catalog))
    return [Predicted("model", message, flags, plan)]


def derived_context_length(folder: Path) -> int | None:
    """The context length SGLang derives from a local model's config.json
    (utils/hf_transformers/common.py get_context_length), None without one."""
    try:
        config = json.loads((folder / "config.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(config, dict):
        return None
    text = config.get("text_config")
    config = text if isinstance(text, dict) else config
    scaling = config.get("rope_scaling")
    factor = 1.0
    if isinstance(scaling, dict) and "original_max_position_embeddings" not in scaling:
        if scaling.get("rope_type") != "llama3":
            factor = float(scaling.get("factor", 1) or 1)
    for key in CONTEXT_LENGTH_KEYS:
        value = config.get(key)
        if isinstance(value, int | float):
            return int(factor * value)
    return DEFAULT_CONTEXT


# ---- the error catalog's conditions ------------------------------------------------------


def condition_problems(
    command: LaunchCommand, catalog: FlagCatalog, errors: ErrorCatalog
) -> list[Predicted]:
    """Startup sites whose guard, read on the command's own flags, says SGLang raises."""
    found = []
    for site in failing_sites(command, catalog, errors):
        message = f"{site.exception}: {site.message or site.condition} ({site.where})"
        found.append(Predicted("condition", message, list(site.flags), FixPlan(), site))
    return found


# ---- shared ------------------------------------------------------------------------------


def _through(
    name: str,
    check: str,
    message: str,
    flags: list[str],
    command: LaunchCommand,
    catalog: FlagCatalog,
) -> Predicted:
    plan = FIXES[name](synthetic_finding(message, flags), FixContext(command, catalog))
    return Predicted(check, message, flags, plan)


def synthetic_finding(
    message: str, flags: list[str], groups: dict[str, str] | None = None
) -> Finding:
    """The Finding a post-mortem would build from SGLang's error message."""
    line = Line("pre-flight", 0, message, message)
    match = Match("pre-flight", line, None, groups or {}, (line,))
    return Finding(match, "preflight", message, "fatal", flags, message, [])

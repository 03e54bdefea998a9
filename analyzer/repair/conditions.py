"""The error catalog's guarding conditions, evaluated on a launch command's own flags.

A raise/assert site of SGLang (analyzer/sglang/error_catalog.py) carries its condition as
source text (`cfg.tp_size % (cfg.attn_dp_size * view.attn_cp_size) == 0`). When every name
it reads is a server argument, the value is the command's (typed, converted by the flag's
type) or argparse's default, so the outcome is known before SGLang runs. Anything else (a
helper call, a local, a model-config field, a None default that resolution fills in) makes
the site unknown, and unknown sites are never reported.
"""

from __future__ import annotations

import ast
from collections.abc import Callable
from functools import cache
from typing import Any

from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.error_catalog import ErrorCatalog, ErrorSite
from analyzer.sglang.launch_command import LaunchCommand

VIEWS = ("cfg", "self", "server_args", "view", "args")
VIEW_CALLS = ("resolved_view",)
# Speculative handlers SGLang calls only for their algorithm (speculative_hook.py).
ALGORITHM_HANDLERS = {
    "_handle_uno": ("UNO",),
    "_handle_dspark": ("DSPARK",),
    "_handle_dflash": ("DFLASH",),
    "_handle_ngram": ("NGRAM",),
    "_handle_eagle_family": ("EAGLE", "EAGLE3", "NEXTN", "STANDALONE"),
}
STARTUP_FOLDERS = ("srt/server_args.py", "srt/arg_groups/")
# SGLang's checks every command goes through (not one model's, device's or feature's)
GENERAL_VALIDATORS = ("check_server_args",)
BOOLEAN_PREFIXES = frozenset(("use", "is", "has", "enable", "enabled"))
# Handlers for one model family run only for it: the flags cannot say whether they apply.
MODEL_SPECIFIC = (
    "model_overrides/",
    "deepseek",
    "minimax",
    "iquest",
    "glm",
    "gemma",
    "qwen",
    "kimi",
    "mimo",
    "muse",
    "llama4",
)
GENERIC_WORDS = frozenset(
    "handle check validate resolve init set get server args arg and of the for default "
    "defaults config configs post apply maybe".split()
)


class Unknown(Exception):
    """The condition reads something the command does not determine."""


class CommandValues:
    """ServerArgs as argparse would fill it from the command: dest -> value."""

    def __init__(
        self, command: LaunchCommand, catalog: FlagCatalog, unset_is_none: bool = False
    ) -> None:
        self.catalog = catalog
        self.unset_is_none = unset_is_none
        self.typed: dict[str, Any] = {}
        self.read: set[str] = set()
        self.aliases: dict[str, str] = {}  # a local copy of one setting -> its dest
        for argument in command.arguments:
            spec = catalog.spec(argument.flag)
            if spec is not None:
                self.typed[spec.dest] = _converted(spec.type, spec.takes_value, argument.value)

    def __call__(self, dest: str) -> Any:
        spec = self.catalog.by_dest(dest)
        if spec is None:
            raise Unknown(dest)
        self.read.add(dest)
        if dest in self.typed:
            value = self.typed[dest]
            return [value] if spec.nargs in ("*", "+") else value
        if spec.action == "store_true":
            return False
        if spec.default is None and not self.unset_is_none:
            raise Unknown(dest)
        return spec.default


def _converted(kind: str | None, takes_value: bool, value: str | None) -> Any:
    if not takes_value:
        return True
    if value is None:
        raise Unknown("a flag without its value")
    try:
        if kind == "int":
            return int(value)
        if kind == "float":
            return float(value)
    except ValueError:
        return value
    return value


def site_fails(site: ErrorSite, values: Callable[[str], Any]) -> bool:
    """Whether SGLang raises at this site for these values (raises Unknown when unsure)."""
    for guard in site.context:
        if not evaluate(guard, values):
            return False
    outcome = evaluate(site.condition, values)
    return not outcome if site.kind == "assert" else bool(outcome)


def failing_sites(
    command: LaunchCommand, catalog: FlagCatalog, errors: ErrorCatalog, min_reads: int = 2
) -> list[ErrorSite]:
    """Startup sites that fail on the command and read two or more of its settings.

    One setting alone is not enough: many handlers run only for one model or algorithm,
    which the site's own guards do not say, so `cfg.pp_size != 1` alone would be claimed
    for every command with --pp-size. A relation between settings (a divisibility, two
    flags that exclude each other) is what this can judge. The pre-flight also asks for
    `min_reads=1` on the generic validators (validation_hook.py: ranges of one setting).
    """
    typed = CommandValues(command, catalog).typed
    algorithm = str(typed.get("speculative_algorithm", "")).upper()
    typed_words = {w for dest in typed for w in dest.split("_")}
    found = []
    for site in _startup_sites(errors):
        function = site.function.rsplit(".", 1)[-1]
        if any(word in f"{site.file} {site.function}".lower() for word in MODEL_SPECIFIC):
            continue
        handler = ALGORITHM_HANDLERS.get(function)
        if handler is not None and algorithm not in handler:
            continue
        if not _feature_typed(function, typed_words, catalog):
            continue
        values = CommandValues(command, catalog, min_reads < 2 and _names_its_flags(site))
        if min_reads < 2:
            values.aliases = local_aliases(site)
        try:
            fails = site_fails(site, values)
        except Unknown:
            continue
        reads = min_reads if _validator(site) else max(min_reads, 2)
        if fails and len(values.read) >= reads and values.read & set(values.typed):
            found.append(site)
    return found


def _names_its_flags(site: ErrorSite) -> bool:
    """A message that names every flag its check reads (`--speculative-draft-sink-size
    requires --speculative-draft-window-size.`) checks them as typed: an unset one is None."""
    flags = {*site.condition_flags, *site.context_flags}
    return bool(flags) and all(flag in site.message for flag in flags)


def local_aliases(site: ErrorSite) -> dict[str, str]:
    """`window_size <= 0` after `window_size = int(cfg.speculative_draft_window_size)`: one
    free name in the condition and one setting the catalog says it reads but the text does
    not name, the name's words (less a use_/is_ prefix) among the setting's: its local copy.
    A loop variable over a list setting (`lora_path` of lora_paths) is not one."""
    try:
        tree = ast.parse(site.condition, mode="eval")
    except SyntaxError:
        return {}
    called = {id(n.func) for n in ast.walk(tree) if isinstance(n, ast.Call)}
    names = {
        n.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Name) and n.id not in VIEWS and id(n) not in called
    }
    named = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    unnamed = [r for r in site.condition_reads if r not in named]
    if len(names) != 1 or len(unnamed) != 1:
        return {}
    name = names.pop()
    if not set(name.split("_")) - BOOLEAN_PREFIXES <= set(unnamed[0].split("_")):
        return {}
    return {name: unnamed[0]}


def _validator(site: ErrorSite) -> bool:
    """A check of one setting's own range, which every command goes through: in SGLang's
    general check_server_args, in a validator named for the setting
    (validate_prefill_decode_interval), or one whose message names the flag it reads
    (`--speculative-draft-window-size must be positive`). Other validators run only for a
    device or a model the command does not show (validate_standard_mps_server_args)."""
    function = site.function.rsplit(".", 1)[-1].strip("_")
    if function in GENERAL_VALIDATORS:
        return True
    if any(flag in site.message for flag in site.condition_flags):
        return True
    words = set(function.split("_"))
    return any(set(read.split("_")) <= words for read in site.condition_reads)


def _feature_typed(function: str, typed_words: set[str], catalog: FlagCatalog) -> bool:
    """A handler named for a feature (`handle_dwdp`, `check_watermark_server_args`) runs
    only when that feature is on, which its `if not ...: return` says and the catalog
    does not: such a site counts only when a flag of that feature is typed."""
    for word in function.strip("_").split("_"):
        if word in GENERIC_WORDS or len(word) < 3:
            continue
        if word in _flag_words(catalog) and word not in typed_words:
            return False
    return True


@cache
def _flag_words(catalog: FlagCatalog) -> frozenset[str]:
    return frozenset(w for spec in catalog.specs for w in spec.dest.split("_"))


def _startup_sites(errors: ErrorCatalog) -> list[ErrorSite]:
    return [
        site
        for site in errors.entries
        if site.startup
        and site.file.startswith(STARTUP_FOLDERS)
        and site.condition
        and (site.condition_flags or site.context_flags)
    ]


def evaluate(text: str, values: Callable[[str], Any]) -> Any:
    """The value of a condition's source text; Unknown for anything but server arguments,
    constants and arithmetic."""
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as exc:
        raise Unknown(text) from exc
    return _eval(tree.body, values)


_COMPARE: dict[type, Callable[[Any, Any], bool]] = {
    ast.Eq: lambda a, b: a == b,
    ast.NotEq: lambda a, b: a != b,
    ast.Lt: lambda a, b: a < b,
    ast.LtE: lambda a, b: a <= b,
    ast.Gt: lambda a, b: a > b,
    ast.GtE: lambda a, b: a >= b,
    ast.In: lambda a, b: a in b,
    ast.NotIn: lambda a, b: a not in b,
    ast.Is: lambda a, b: a is b,
    ast.IsNot: lambda a, b: a is not b,
}
_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: lambda a, b: a + b,
    ast.Sub: lambda a, b: a - b,
    ast.Mult: lambda a, b: a * b,
    ast.FloorDiv: lambda a, b: a // b,
    ast.Mod: lambda a, b: a % b,
    ast.BitAnd: lambda a, b: a & b,
}


def _eval(node: ast.AST, values: Callable[[str], Any]) -> Any:
    try:
        return _node(node, values)
    except (TypeError, ZeroDivisionError, ValueError) as exc:
        raise Unknown(ast.dump(node)) from exc


def _node(node: ast.AST, values: Callable[[str], Any]) -> Any:
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Attribute) and _is_view(node.value):
        return values(node.attr)
    if isinstance(node, ast.Name) and node.id in getattr(values, "aliases", {}):
        return values(values.aliases[node.id])  # type: ignore[attr-defined]
    if isinstance(node, ast.BoolOp):
        result: Any = isinstance(node.op, ast.And)
        for item in node.values:
            result = _eval(item, values)
            if isinstance(node.op, ast.And) and not result:
                return result
            if isinstance(node.op, ast.Or) and result:
                return result
        return result
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.USub)):
        operand = _eval(node.operand, values)
        return (not operand) if isinstance(node.op, ast.Not) else -operand
    if isinstance(node, ast.Compare):
        left = _eval(node.left, values)
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = _eval(right_node, values)
            if not _COMPARE[type(op)](left, right):
                return False
            left = right
        return True
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        return _BINARY[type(node.op)](_eval(node.left, values), _eval(node.right, values))
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        items = [_eval(item, values) for item in node.elts]
        return set(items) if isinstance(node, ast.Set) else tuple(items)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and len(node.args) == 1:
        if node.func.id == "int":
            return int(_eval(node.args[0], values))
        if node.func.id == "attn_dp_enabled_of" and _is_view(node.args[0]):
            # runtime_context.attn_dp_enabled_of, less the elastic-EP scale joiner
            return values("attn_dp_size") > 1
    raise Unknown(type(node).__name__)


def _is_view(node: ast.AST) -> bool:
    if isinstance(node, ast.Name):
        return node.id in VIEWS
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in VIEW_CALLS
        and len(node.args) == 1
        and _is_view(node.args[0])
    )

"""Rules as data: load and validate the TOML rule files.

One file per rule. The vocabulary (documented in docs/rules.md):

    id, class, title, severity       what the incident is called
    scope                            line | traceback | usage | log
    triggers                         literals; a line rule only looks at lines holding one
    patterns                         `regex` patterns with named groups (any may match);
                                     group `hl`, if present, is the span highlighted
    frame, code                      traceback scope: a frame's file/function, the failing line
    innermost                        traceback scope: the innermost SGLang frame's file/function
                                     (where the failure happened; `frame` then names a caller)
    frameless                        traceback scope, with frame/code: how an exception pasted
                                     without frames is judged: `true` (by `patterns`) or a list
                                     of patterns whose message alone places it
    requires                         context the log must have (see REQUIREMENTS)
    flags, flags_group               flags involved, fixed or read from a named group
    logic, fix                       names of one Python function each (rulelogic / fixes)
    priority, alone                  root-cause order; report only when nothing else fired
    outside_command                  no edit of the launch command fixes it (install, network)
    generic                          a catch-all: where the error catalog places the exception
                                     in a raise-site family, the family's class wins
    explanation, advice              text; `{group}` placeholders are filled from the match;
                                     an advice entry {text, when, is} shows only if group
                                     `when` is non-empty (and equals `is`); {text, feature}
                                     only if the input shows that feature (rulebook/
                                     shown_features.py: the command, server_args, frames)
    feature_explanation              {feature = text}: added to the explanation only if the
                                     input shows that feature
    unclassified_explanation         a generic rule's text (no placeholders) added only when no
                                     raise-site family classifies the incident
    [doc] detects, why, fix          the rule's documentation
    [[cases]] lines, fires           inline examples the generic test runner checks
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import regex

from analyzer.core import lazy_pattern, toml_data
from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import SEVERITIES
from analyzer.core.package_files import package_files
from analyzer.core.parse_cache import cached

SCOPES = ("line", "traceback", "usage", "log")
# the features advice may depend on (rulebook/shown_features.py tells which an input shows)
FEATURE_NAMES = ("speculative", "quantization", "lora", "dp_attention")
REQUIREMENTS = (
    "startup", "not_ready", "ready", "no_traceback", "no_usage", "empty", "not_empty",
    "exited", "not_exited",
)  # fmt: skip
KNOWN_KEYS = {
    "id", "class", "title", "severity", "scope", "triggers", "patterns", "frame", "frameless", "code",
    "innermost", "requires", "flags", "flags_group", "logic", "fix", "priority", "alone", "generic",
    "outlives_serving", "outside_command", "explanation", "advice", "doc", "cases",
    "feature_explanation", "unclassified_explanation",
}  # fmt: skip
# the rule ids of incidents a catalog classed, not a rule file: a raise-site family's
# (raise_site_rules.py), a frame phase's (frame_phases.py); here so the pipeline names them
# without importing those
FAMILY_RULE_PREFIX = "raise-site:"
PHASE_RULE_PREFIX = "frame-phase:"
CATALOG_RULE_PREFIXES = (FAMILY_RULE_PREFIX, PHASE_RULE_PREFIX)


class RuleError(Exception):
    """A malformed rule file: the message names the file, the rule id and what is wrong."""


@dataclass(frozen=True)
class RuleDoc:
    """A rule's documentation: what it detects, why it happens, how to fix it."""

    detects: str
    why: str
    fix: str


@dataclass(frozen=True)
class RuleCase:
    """An inline example: these lines, scanned as a log, must (not) fire the rule."""

    lines: tuple[str, ...]
    fires: bool


@dataclass(frozen=True)
class Advice:
    """One advice line, shown only when group `when` is non-empty (or equals `is_`), and
    only when the input shows `feature` (if set)."""

    text: str
    when: str | None = None
    is_: str | None = None
    feature: str | None = None


@dataclass(frozen=True)
class Rule:
    """One rule, as read from its TOML file (the vocabulary is in the module docstring)."""

    id: str
    rule_class: str
    title: str
    severity: str
    scope: str
    doc: RuleDoc
    path: str
    explanation: str = ""
    advice: tuple[Advice, ...] = ()
    # (feature, text): explanation text that holds only when the input shows the feature
    feature_explanation: tuple[tuple[str, str], ...] = ()
    unclassified_explanation: str = ""
    triggers: tuple[str, ...] = ()
    patterns: tuple[LazyPattern, ...] = ()
    frame: LazyPattern | None = None
    code: LazyPattern | None = None
    innermost: LazyPattern | None = None
    frameless: tuple[LazyPattern, ...] = ()
    requires: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()
    flags_group: str | None = None
    logic: str | None = None
    fix: str | None = None
    priority: int = 50
    alone: bool = False
    generic: bool = False
    # a failure of what the server relies on (a transfer path, a peer), not of one request:
    # serving after it does not make it survived (engine/survival.py)
    outlives_serving: bool = False
    # no edit of the launch command fixes it (the install, the network, the checkpoint)
    outside_command: bool = False
    cases: tuple[RuleCase, ...] = field(default=(), compare=False)


T = TypeVar("T")


def catalog_entries(
    package: str, name: str, table: str, build: Callable[[dict[str, Any]], T]
) -> tuple[T, ...]:
    """The `[[table]]` entries of a shipped catalog of rule data (the raise-site families of
    catalogs/raise_sites.toml, the frame phases of frame_phases.toml), each built, in file
    order (raises RuleError naming the file, the entry and what is wrong)."""
    path = f"analyzer/catalogs/{name}"
    try:
        data = toml_data.shipped_toml(package, name)
    except toml_data.TomlError as exc:
        raise RuleError(f"{path}: not valid TOML ({exc})") from None
    entries = []
    for entry in data.get(table, []):
        try:
            entries.append(build(entry))
        except (KeyError, TypeError, ValueError, re.error) as exc:
            raise RuleError(f"{path}: {table} {entry.get('id', '<no id>')}: {exc}") from None
    return tuple(entries)


def load_rules(extra_dirs: list[str] | None = None) -> list[Rule]:
    """The shipped rules plus any user rule folders; ids must be unique."""
    rules = list(_shipped_rules())
    for directory in extra_dirs or []:
        folder = Path(directory)
        if not folder.is_dir():
            raise RuleError(f"{directory}: --rules expects a folder of *.toml rule files")
        for path in sorted(folder.glob("*.toml")):
            rules.append(_load_text(_read(path), str(path), compile_now=True))
    _check_unique(rules)
    return rules


def _shipped_rules() -> list[Rule]:
    """The shipped rules, parsed once and kept between runs (core/parse_cache.py)."""
    files = _shipped_files()
    here = Path(__file__)
    code = [
        here,
        here.with_name("logic.py"),
        here.parent.parent / "repair" / "fix_registry.py",  # the fix names a rule may give
        Path(lazy_pattern.__file__),
    ]
    return cached(
        "rules",
        [*files, *code],
        lambda: [_load_text(p.read_text("utf-8"), f"rules/{p.name}") for p in files],
    )


def _shipped_files() -> list[Any]:
    folder = package_files("analyzer.rules")
    return sorted((p for p in folder.iterdir() if p.name.endswith(".toml")), key=lambda p: p.name)


def _read(path: Path) -> str:
    try:
        return path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise RuleError(f"{path}: cannot read rule file ({exc})") from None


def _check_unique(rules: list[Rule]) -> None:
    seen: dict[str, str] = {}
    for rule in rules:
        if rule.id in seen:
            raise RuleError(f"{rule.path}: rule {rule.id}: id already used by {seen[rule.id]}")
        seen[rule.id] = rule.path


def _load_text(text: str, path: str, compile_now: bool = False) -> Rule:
    try:
        data = toml_data.loads(text)
    except toml_data.TomlError as exc:
        raise RuleError(f"{path}: not valid TOML ({exc})") from None
    except RecursionError:  # tomllib recurses once per nested array or inline table
        raise RuleError(f"{path}: not valid TOML (nested too deep to read)") from None
    rule_id = data.get("id")
    where = f"{path}: rule {rule_id or '<no id>'}"
    try:
        rule = _build(data, path)
        if compile_now:
            compile_patterns(rule)
        return rule
    except (KeyError, TypeError, ValueError, regex.error) as exc:
        raise RuleError(f"{where}: {_explain(exc)}") from None


def _explain(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"missing required key {exc.args[0]!r}"
    if isinstance(exc, regex.error):
        return f"bad pattern ({exc})"
    return str(exc)


def _build(data: dict[str, Any], path: str) -> Rule:
    unknown = sorted(set(data) - KNOWN_KEYS)
    if unknown:
        raise ValueError(f"unknown key(s) {', '.join(unknown)}")
    scope = data.get("scope", "line")
    _check_choice("scope", scope, SCOPES)
    _check_choice("severity", data["severity"], SEVERITIES)
    for requirement in _strings(data, "requires"):
        _check_choice("requires", requirement, REQUIREMENTS)
    patterns = tuple(LazyPattern(p) for p in _strings(data, "patterns"))
    triggers = _strings(data, "triggers")
    if scope == "line" and not (patterns and triggers):
        raise ValueError("a line rule needs patterns and trigger literals")
    if scope in ("usage", "traceback") and not patterns:
        raise ValueError(f"a {scope} rule needs patterns")
    frameless = _frameless(data, patterns)
    if frameless and not (scope == "traceback" and (data.get("frame") or data.get("code"))):
        raise ValueError("frameless belongs to a traceback rule with a frame or code")
    if data.get("innermost") and scope != "traceback":
        raise ValueError("innermost belongs to a traceback rule")
    doc = data["doc"]
    rule = Rule(
        id=_string(data, "id"),
        rule_class=_string(data, "class"),
        title=_string(data, "title"),
        severity=data["severity"],
        scope=scope,
        doc=RuleDoc(_string(doc, "detects"), _string(doc, "why"), _string(doc, "fix")),
        path=path,
        explanation=str(data.get("explanation", "")),
        advice=tuple(_advice(a) for a in data.get("advice", [])),
        feature_explanation=_feature_texts(data.get("feature_explanation", {})),
        unclassified_explanation=str(data.get("unclassified_explanation", "")),
        triggers=triggers,
        patterns=patterns,
        frame=_optional_pattern(data, "frame"),
        code=_optional_pattern(data, "code"),
        innermost=_optional_pattern(data, "innermost"),
        frameless=frameless,
        requires=_strings(data, "requires"),
        flags=_strings(data, "flags"),
        flags_group=data.get("flags_group"),
        logic=data.get("logic"),
        fix=data.get("fix"),
        priority=int(data.get("priority", 50)),
        alone=bool(data.get("alone", False)),
        outlives_serving=bool(data.get("outlives_serving", False)),
        outside_command=bool(data.get("outside_command", False)),
        generic=bool(data.get("generic", False)),
        cases=tuple(_case(c) for c in data.get("cases", [])),
    )
    _check_group(rule)
    _check_functions(rule)
    return rule


def _check_group(rule: Rule) -> None:
    if (
        rule.flags_group
        and not rule.logic
        and not any(rule.flags_group in p.group_names for p in rule.patterns)
    ):
        raise ValueError(f"flags_group {rule.flags_group!r} is not a named group of any pattern")


def _check_functions(rule: Rule) -> None:
    from analyzer.repair import fix_registry as registry
    from analyzer.rulebook import logic as rulelogic

    if rule.logic and rule.logic not in rulelogic.LOGIC:
        raise ValueError(f"logic {rule.logic!r} is not a function in analyzer/rulebook/logic.py")
    if rule.fix and rule.fix not in registry.FIXES:
        raise ValueError(f"fix {rule.fix!r} is not a fix function (analyzer/repair/fix_registry.py)")


def _check_choice(key: str, value: Any, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise ValueError(f"{key} must be one of {', '.join(allowed)}, not {value!r}")


def _string(data: dict[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{key!r} must be a non-empty string")
    return value.strip()


def _frameless(data: dict[str, Any], patterns: tuple[LazyPattern, ...]) -> tuple[LazyPattern, ...]:
    """`frameless = true` judges a frameless exception by the rule's own patterns."""
    value = data.get("frameless", False)
    if isinstance(value, bool):
        return patterns if value else ()
    return tuple(LazyPattern(p) for p in _strings(data, "frameless"))


def _strings(data: dict[str, Any], key: str) -> tuple[str, ...]:
    value = data.get(key, [])
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{key!r} must be a list of strings")
    return tuple(value)


def _optional_pattern(data: dict[str, Any], key: str) -> LazyPattern | None:
    value = data.get(key)
    return LazyPattern(value) if value else None


def compile_patterns(rule: Rule) -> None:
    """Compile every pattern of a rule now (raises regex.error for a bad one)."""
    for pattern in (*rule.patterns, *rule.frameless, rule.frame, rule.code, rule.innermost):
        if pattern is not None:
            _ = pattern.compiled


def _advice(item: Any) -> Advice:
    if isinstance(item, str):
        return Advice(item)
    if isinstance(item, dict) and isinstance(item.get("text"), str):
        extra = set(item) - {"text", "when", "is", "feature"}
        if extra:
            raise ValueError(f"advice entry has unknown key(s) {', '.join(sorted(extra))}")
        feature = item.get("feature")
        if feature is not None:
            _check_choice("advice feature", feature, FEATURE_NAMES)
        return Advice(item["text"], item.get("when"), item.get("is"), feature)
    raise ValueError("advice entries must be strings or {text, when, is, feature} tables")


def _feature_texts(table: Any) -> tuple[tuple[str, str], ...]:
    if not isinstance(table, dict) or not all(isinstance(v, str) for v in table.values()):
        raise ValueError("feature_explanation must be a table of feature = text")
    for feature in table:
        _check_choice("feature_explanation", feature, FEATURE_NAMES)
    return tuple(table.items())


def _case(data: dict[str, Any]) -> RuleCase:
    return RuleCase(lines=_strings(data, "lines"), fires=bool(data["fires"]))


def all_triggers(rules: list[Rule]) -> list[str]:
    """Every line rule's trigger literal, deduplicated, in a stable order."""
    return sorted({t for r in rules if r.scope == "line" for t in r.triggers})

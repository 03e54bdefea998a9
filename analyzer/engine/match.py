"""Stage 3: run the rules over a scanned log and return raw matches.

Each scope looks at its own part of the ScannedLog: line rules at candidate
lines (only those holding one of the rule's trigger literals), traceback rules
at each exception and its chained causes, usage rules at argparse's error line,
log rules once per input.
"""

from __future__ import annotations

from collections.abc import Iterator

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import Line, Match, ScannedLog, Traceback
from analyzer.rulebook import logic as rulelogic
from analyzer.rulebook.vocabulary import Rule

PATTERN_TIMEOUT = 1.0
SGLANG_FILES = "sglang/"


def match_rules(rules: list[Rule], log: ScannedLog) -> tuple[list[Match], list[str]]:
    """All matches of all rules in one input (before deduplication), and warnings.

    A pattern that runs longer than PATTERN_TIMEOUT on one text (a catastrophic user
    pattern) stops its rule for this input with a warning naming the rule.
    """
    matches: list[Match] = []
    warnings: list[str] = []
    for rule in rules:
        if not _requirements_met(rule, log):
            continue
        try:
            for match in _SCOPES[rule.scope](rule, log):
                refined = _apply_logic(rule, match, log)
                if refined is not None:
                    matches.append(refined)
        except TimeoutError:
            warnings.append(
                f"rule {rule.id} ({rule.path}) stopped: a pattern ran over "
                f"{PATTERN_TIMEOUT:g} s on one line; simplify it (nested quantifiers?)"
            )
    return matches, warnings


def _requirements_met(rule: Rule, log: ScannedLog) -> bool:
    checks = {
        "startup": log.startup_began,
        "not_ready": log.ready is None,
        "ready": log.ready is not None,
        "no_traceback": not log.tracebacks,
        "no_usage": not log.usage_dumps,
        "empty": log.summary.lines == 0,
        "not_empty": log.summary.lines > 0,
        "exited": log.exit_status is not None,
        "not_exited": log.exit_status is None,
    }
    return all(checks[r] for r in rule.requires)


def _search(rule: Rule, text: str, patterns: tuple[LazyPattern, ...] | None = None):
    for pattern in rule.patterns if patterns is None else patterns:
        found = pattern.search(text, timeout=PATTERN_TIMEOUT)
        if found:
            return found
    return None


def _line_matches(rule: Rule, log: ScannedLog) -> Iterator[Match]:
    for line in log.candidates:
        if not any(t in line.text for t in rule.triggers):
            continue
        found = _search(rule, line.body)
        if found:
            yield _match(rule, line, found, (line,), _ranks(line))


def _traceback_matches(rule: Rule, log: ScannedLog) -> Iterator[Match]:
    for traceback in log.tracebacks:
        for part in (traceback, *reversed(traceback.chain)):
            found = _traceback_search(rule, part)
            if found:
                line = part.exception_line
                evidence = _traceback_evidence(traceback, part)
                yield _match(rule, line, found, evidence, _ranks(traceback.first), traceback)
                break


def _traceback_search(rule: Rule, traceback: Traceback):
    frames = traceback.frames
    text = f"{traceback.exception_type}: {traceback.exception_message}".rstrip(": ")
    if not frames and rule.frameless:
        return _search(rule, text, rule.frameless)
    if rule.frame and not any(
        rule.frame.search(f"{f.file} {f.function}", timeout=PATTERN_TIMEOUT) for f in frames
    ):
        return None
    if rule.innermost:
        own = [f for f in frames if SGLANG_FILES in f.file.replace("\\", "/")]
        where = f"{own[-1].file} {own[-1].function}" if own else None
        if where is None or not rule.innermost.search(where, timeout=PATTERN_TIMEOUT):
            return None
    if rule.code:
        last = traceback.last_frame
        if last is None or not rule.code.search(last.code, timeout=PATTERN_TIMEOUT):
            return None
    return _search(rule, text)


def _traceback_evidence(whole: Traceback, part: Traceback) -> tuple[Line, ...]:
    """The traceback's first line, the last frames and the exception line."""
    lines = list(part.lines)
    frame_lines = [ln for ln in lines if ln.body.lstrip().startswith('File "')]
    keep: list[Line] = [whole.first]
    if frame_lines:
        start = lines.index(frame_lines[-1])
        keep.extend(lines[start : start + 3])
    keep.append(part.exception_line)
    unique = {ln.number: ln for ln in keep}
    return tuple(unique[n] for n in sorted(unique))


def _usage_matches(rule: Rule, log: ScannedLog) -> Iterator[Match]:
    for dump in log.usage_dumps:
        if dump.error is None:
            continue
        found = _search(rule, dump.error.body)
        if found:
            # an error line alone (no usage text above it) is the dump's first line too
            evidence = (dump.error,) if dump.first.number == dump.error.number else (dump.first, dump.error)
            yield _match(rule, dump.error, found, evidence, ())


def _log_matches(rule: Rule, log: ScannedLog) -> Iterator[Match]:
    last = log.tail[-1] if log.tail else Line(log.summary.path, 0, "", "")
    evidence = tuple(log.tail[-5:])
    if rule.patterns:
        for line in reversed(log.tail):
            found = _search(rule, line.body)
            if found:
                yield _match(rule, line, found, (line,), _ranks(line))
                return
        return
    yield Match(rule.id, last, None, {}, evidence)


def _match(rule, line, found, evidence, ranks, traceback=None) -> Match:
    groups = {k: v for k, v in found.groupdict().items() if v is not None}
    highlight = "hl" if "hl" in groups else 0
    if found.string == line.body:
        start, end = found.span(highlight)
    else:
        text = found.group(highlight)
        start = line.body.find(text) if text else -1
        end = start + len(text)
    # the body ends the text, unless a tool's column follows it (rich's `file.py:N`)
    ends = line.text.endswith(line.body)
    offset = len(line.text) - len(line.body) if ends else line.text.find(line.body)
    span = (start + offset, end + offset) if start >= 0 else None
    return Match(rule.id, line, span, groups, evidence, ranks, traceback)


def _ranks(line: Line) -> tuple[str, ...]:
    label = line.rank_label
    return (label,) if label else ()


def _apply_logic(rule: Rule, match: Match, log: ScannedLog) -> Match | None:
    if not rule.logic:
        return match
    extra = rulelogic.LOGIC[rule.logic](match, log)
    if extra is None:
        return None
    return Match(
        match.rule_id,
        match.line,
        match.span,
        {**match.groups, **extra},
        match.evidence,
        match.ranks,
        match.traceback,
    )


_SCOPES = {
    "line": _line_matches,
    "traceback": _traceback_matches,
    "usage": _usage_matches,
    "log": _log_matches,
}

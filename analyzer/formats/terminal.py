"""The terminal report: rich panels on a TTY, plain text otherwise (pipes, NO_COLOR).

Log text is always passed to rich as Text (never markup) and stripped of control
characters, so a hostile log cannot style, move or clear the user's terminal. Evidence and
prose longer than MAX_SHOWN are cut with a note of how much; commands never are: each is
printed on one line of its own, outside any panel, so a terminal copy gives it back whole.
"""

from __future__ import annotations

import difflib

import regex

from analyzer.core.model import Incident, Line, Report
from analyzer.nodes.node_text import incident_node, node_heading, node_lines

CONTROL = regex.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MAX_SHOWN = 400


def clean(text: str) -> str:
    """Printable text cut at MAX_SHOWN: control characters (escape sequences included)
    become `?`, and a cut says how much it left out."""
    text = whole(text)
    if len(text) <= MAX_SHOWN:
        return text
    return f"{text[:MAX_SHOWN]} … [cut: {len(text) - MAX_SHOWN} more characters]"


def whole(text: str) -> str:
    """Printable text, never cut (commands): control characters become `?`."""
    return CONTROL.sub("?", text)


def headline(report: Report) -> str:
    count = len(report.incidents)
    names = ", ".join(s.path for s in report.inputs) or "no input"
    if report.verdict == "no incident":
        return f"loganalyze: no incident in {names}"
    plural = "incident" if count == 1 else "incidents"
    return f"loganalyze: {count} {plural} in {names} — verdict: {report.verdict}"


def token_diff(original: str, corrected: str) -> list[tuple[str, str]]:
    """(tag, text) pieces of a word diff: tag is ' ', '-' or '+'."""
    a, b = original.split(" "), corrected.split(" ")
    pieces: list[tuple[str, str]] = []
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            pieces.append((" ", " ".join(a[i1:i2])))
            continue
        if i2 > i1:
            pieces.append(("-", " ".join(a[i1:i2])))
        if j2 > j1:
            pieces.append(("+", " ".join(b[j1:j2])))
    return pieces


def _edit_text(incident: Incident) -> list[str]:
    out = []
    for e in incident.edits:
        if e.op == "rename":
            out.append(f"rename {e.flag} -> {e.to}" + (f" {e.value}" if e.value else ""))
        elif e.op == "remove":
            out.append(f"remove {e.flag}")
        else:
            out.append(f"{e.op} {e.flag}" + (f" {e.value}" if e.value is not None else ""))
    return out


# ---- plain text -------------------------------------------------------------------------


def render_plain(report: Report) -> str:
    out = [headline(report), *_node_lines(report)]
    for index, incident in enumerate(report.incidents, start=1):
        out.append("")
        out.extend(_plain_incident(index, incident))
    out.extend(_timeline(report))
    if report.verdict == "unknown" or not report.incidents:
        out.extend(_plain_tail(report))
    for warning in report.warnings:
        out.append(f"note: {clean(warning)}")
    return "\n".join(out) + "\n"


def render_command(report: Report) -> str:
    """Only the root cause's corrected command, for scripts; nothing when there is none."""
    corrected = report.incidents[0].corrected_command if report.incidents else None
    return f"{corrected}\n" if corrected else ""


def _plain_incident(index: int, incident: Incident) -> list[str]:
    out = [f"[{index}] {incident.severity.upper()} {incident.rule_class}: {clean(incident.title)}"]
    where = f"    at {_where(incident)}"
    if incident.ranks:
        where += f"  ranks: {', '.join(incident.ranks)}"
    out.append(where)
    if node := incident_node(incident):  # a multi-node run's: the node and its cause
        out.append(f"    node: {clean(node)}")
    elif incident.consequence_of is not None:
        out.append(f"    {_follows(incident.consequence_of)}")
    if incident.offending_flags:
        out.append(f"    flags: {' '.join(incident.offending_flags)}")
    out.append("    evidence:")
    width = max(len(str(ln.number)) for ln in incident.evidence) if incident.evidence else 1
    for line in incident.evidence:
        out.append(f"      {line.number:>{width}} | {clean(line.text)}")
        if _is_decisive(line, incident) and incident.span and incident.span[1] <= MAX_SHOWN:
            start, end = incident.span
            out.append(f"      {'':>{width}} | {' ' * start}{'^' * max(end - start, 1)}")
    if incident.explanation:
        out.append(f"    why: {clean(incident.explanation)}")
    if incident.advice:
        out.append("    advice:")
        out.extend(f"      - {clean(a)}" for a in incident.advice)
    out.extend(_plain_commands(incident))
    return out


def _node_lines(report: Report) -> list[str]:
    """A multi-node run: which node failed first, and what each other node shows."""
    if not report.nodes:
        return []
    return [f"{node_heading(report)}:", *(f"  {clean(line)}" for line in node_lines(report))]


def _where(incident: Incident) -> str:
    """`source:line`; for a transcript also the record the line is in and the attempt."""
    where = f"{incident.source}:{incident.line}"
    decisive = _decisive_line(incident)
    if decisive is not None and decisive.ref:
        where += f" ({clean(decisive.ref)})"
    if incident.attempt is not None:
        where += f"  attempt {incident.attempt}"
    return where


def _decisive_line(incident: Incident) -> Line | None:
    return next((ln for ln in incident.evidence if ln.number == incident.line), None)


def _is_decisive(line: Line, incident: Incident) -> bool:
    """The line the span is on: transcript lines share numbers across records (refs)."""
    decisive = _decisive_line(incident)
    return decisive is not None and line.number == decisive.number and line.ref == decisive.ref


def _timeline(report: Report) -> list[str]:
    """A session's launches: outcome, class, command, and what changed since one worked."""
    out: list[str] = []
    source = None
    for attempt in report.attempts:
        if attempt.source != source:
            source = attempt.source
            out.extend(["", f"timeline of {source}:"])
        when = f"  {attempt.timestamp}" if attempt.timestamp else ""
        out.append(f"  #{attempt.number} {attempt.outcome:<7} {attempt.rule_class or '-'}{when}")
        out.append(f"     {whole(' '.join(attempt.command.split()))}")
        if attempt.signals and attempt.outcome != "ready":
            out.append(f"     seen: {clean('; '.join(attempt.signals))}")
        if attempt.flag_diff:
            changes = "; ".join(
                f"{c.flag} {c.before or '(absent)'} -> {c.after or '(absent)'}"
                for c in attempt.flag_diff
            )
            out.append(f"     changed since #{attempt.diff_from}: {clean(changes)}")
    return out


def _plain_commands(incident: Incident) -> list[str]:
    out = []
    if incident.command:
        out.append(f"    command ({incident.command_source}):")
        out.append(f"      {whole(incident.command)}")
    if incident.corrected_command:
        out.append("    corrected command:")
        out.append(f"      {whole(incident.corrected_command)}")
        out.append(f"    edits: {'; '.join(_edit_text(incident))}")
    if incident.verification:
        out.append(f"    {clean(incident.verification.describe())}")
    for alternative in incident.alternatives:
        out.append("    alternative corrected command:")
        out.append(f"      {whole(alternative.command)}")
    return out


def _plain_tail(report: Report) -> list[str]:
    if not report.last_lines:
        return []
    out = ["", "last lines:"]
    out.extend(f"  {ln.number:>6} | {clean(ln.text)}" for ln in report.last_lines[-15:])
    return out


# ---- rich ---------------------------------------------------------------------------------


def render_rich(report: Report, console) -> None:
    """Print the report with rich panels (imports rich lazily)."""
    from rich.panel import Panel
    from rich.text import Text

    console.print(Text(headline(report), style="bold"))
    for line in _node_lines(report):
        console.print(Text(line))
    for index, incident in enumerate(report.incidents, start=1):
        style = {"fatal": "red", "error": "red", "warning": "yellow"}.get(incident.severity, "cyan")
        title = Text(f"[{index}] {incident.severity.upper()} {incident.rule_class}", style=style)
        console.print(
            Panel(_rich_body(incident), title=title, title_align="left", border_style=style)
        )
        _rich_commands(console, incident)
    for line in _timeline(report):
        console.print(Text(line))
    if report.verdict == "unknown" or not report.incidents:
        for line in _plain_tail(report):
            console.print(Text(line))
    for warning in report.warnings:
        console.print(Text(f"note: {clean(warning)}", style="dim"))


def _follows(cause: int) -> str:
    """A consequence names its cause by the number the report shows it under."""
    return f"follows from [{cause + 1}]: a consequence of it, not a cause of its own"


def _rich_body(incident: Incident):
    from rich.text import Text

    body = Text()
    body.append(clean(incident.title) + "\n", style="bold")
    where = _where(incident)
    body.append(where + (f"  ranks: {', '.join(incident.ranks)}" if incident.ranks else "") + "\n")
    if node := incident_node(incident):
        body.append(f"node: {clean(node)}\n")
    elif incident.consequence_of is not None:
        body.append(_follows(incident.consequence_of) + "\n", style="dim")
    if incident.offending_flags:
        body.append("flags: ", style="bold")
        body.append(" ".join(incident.offending_flags) + "\n", style="magenta")
    for line in incident.evidence:
        body.append(f"{line.number:>6} │ ", style="dim")
        body.append_text(_highlighted(line, incident))
        body.append("\n")
    if incident.explanation:
        body.append("why: ", style="bold")
        body.append(clean(incident.explanation) + "\n")
    for advice in incident.advice:
        body.append("• " + clean(advice) + "\n")
    if incident.command and incident.corrected_command:
        body.append("change: ", style="bold")
        for tag, piece in token_diff(whole(incident.command), whole(incident.corrected_command)):
            style = {"-": "red strike", "+": "bold green"}.get(tag, "")
            body.append(piece + " ", style=style)
    if incident.verification:
        passed = incident.verification.status == "pass"
        body.append(
            "\n" + clean(incident.verification.describe()), style="green" if passed else "yellow"
        )
    body.rstrip()
    return body


def _highlighted(line: Line, incident: Incident):
    from rich.text import Text

    text = Text(clean(line.text))
    if _is_decisive(line, incident) and incident.span and incident.span[1] <= MAX_SHOWN:
        text.stylize("bold red", *incident.span)
    return text


def _rich_commands(console, incident: Incident) -> None:
    """Each command on a line of its own, soft-wrapped by the terminal (copied whole)."""
    from rich.text import Text

    shown: list[tuple[str, str, str]] = []
    if incident.command and not incident.corrected_command:  # else the panel's diff shows it
        shown.append((f"command ({incident.command_source}):", incident.command, ""))
    if incident.corrected_command:
        shown.append(("corrected command:", incident.corrected_command, "green"))
    shown += [("alternative corrected command:", a.command, "") for a in incident.alternatives]
    for label, command, style in shown:
        console.print(Text(label, style="bold " + (style or "default")))
        console.print(Text(whole(command), style=style), soft_wrap=True)

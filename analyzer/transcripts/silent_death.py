"""A session's `silent_death`: the attempt died and what the session saw of its log explains
nothing. The evidence that shows the death is listed, and the likely causes are ranked,
each pointing at the part of the launch command it blames (a shell error printed at
launch, quoting that broke `bash -c '...'`, a missing log folder, `nohup: failed to run
command`, another interpreter than the last working one, a kill).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import datetime, timezone

import regex

from analyzer.core.model import FlagChange, Incident, Line
from analyzer.sglang.launch_command import LaunchCommand
from analyzer.transcripts import shell
from analyzer.transcripts.command_outputs import GpuSnapshot, NumberedLine
from analyzer.transcripts.session import (
    Attempt,
    Observation,
    Session,
    diff_text,
    evidence_line,
    unique_lines,
)
from analyzer.transcripts.shell import command_ref, same_file

SILENT_RULE = "session-silent-death"
MAX_EVIDENCE = 14
MONTHS = {m: i for i, m in enumerate("Jan Feb Mar Apr May Jun Jul Aug Sep Oct Nov Dec".split(), 1)}
CLOCK_SLACK_HOURS = 14  # a host's local time may be this far from UTC either way


@dataclass
class Cause:
    """One likely cause of a silent death: how sure, what it says, what it points at."""

    score: int
    text: str
    target: str | None = None
    lines: list[tuple[NumberedLine, str | None]] = field(default_factory=list)
    title: str | None = None  # the incident's title when this cause is certain


def silent_causes(
    attempt: Attempt,
    busy: list[tuple[int, int, int]] | None,
    diff: tuple[int, list[FlagChange]] | None,
    last_working: tuple[Attempt, LaunchCommand | None] | None,
    session: Session,
) -> list[Cause]:
    launch = attempt.launch
    causes: list[Cause] = []
    for error in attempt.of_kind("shell_error"):
        cause = _shell_error_cause(error, launch.log_path)
        if cause is not None:
            causes.append(cause)
    for problem in launch.problems:
        target = _problem_target(problem, launch.text)
        if problem.kind == "outside_script":
            causes.append(
                Cause(
                    92,
                    _quoting_text(problem, target),
                    target,
                    [],
                    "The server never started: the quoting broke `bash -c '...'`",
                )
            )
        else:
            causes.append(
                Cause(
                    85,
                    f"The shell read the command differently: {problem.detail}.",
                    target,
                    [],
                    "The server never started: a quote never closes",
                )
            )
    state, evidence = log_state(attempt)
    log = launch.log_path
    said_by_shell = any(c.target == log for c in causes)
    if state == "missing" and log and not said_by_shell:
        folder = os.path.dirname(log)
        if folder and folder not in session.made_dirs and not _folder_seen(attempt, folder):
            causes.append(
                Cause(
                    70,
                    f"The log {log} was never created; nothing in the session made its folder "
                    f"{folder} (`mkdir -p {folder}`), so the redirection may have failed.",
                    log,
                )
            )
        causes.append(
            Cause(
                55,
                "The shell never opened the log, so the launch line itself did not run as "
                "written (a failed cd/ssh before it, or quoting that moved the redirection).",
                log,
            )
        )
    elif state == "empty":
        causes.append(
            Cause(
                60,
                "The log was created but is empty: the process wrote nothing, not even Python's "
                "first warnings, so it died (or was killed) before SGLang started.",
                log,
            )
        )
    elif state == "stale":
        causes.append(
            Cause(
                60,
                "The log is older than the launch: this launch never wrote to it (the "
                "redirection or the command before it did not run).",
                log,
            )
        )
    elif state == "present" and not attempt.of_kind("shell_error"):
        causes.append(
            Cause(
                35,
                "The log shows no error: the process was killed or died in native code "
                "(check `dmesg -T | grep -i -E 'oom|killed'`).",
                None,
            )
        )
    if last_working is not None:
        before, after = last_working[0].launch.interpreter, launch.interpreter
        if before and after and before != after:
            causes.append(
                Cause(
                    68,
                    f"The interpreter changed from `{before}` (attempt {last_working[0].number}, "
                    f"which came up) to `{after}`: a wrong interpreter or venv.",
                    after,
                )
            )
    for kill in attempt.of_kind("kernel_kill"):
        causes.append(
            Cause(
                75,
                "The kernel's OOM killer killed a process (host memory ran out).",
                None,
                [(line, kill.ref) for line in kill.lines[:2]],
            )
        )
    for kill in attempt.of_kind("kill"):
        causes.append(
            Cause(
                50,
                f"The session itself ran `{kill.command}` after the launch.",
                None,
                [(kill.command_line, command_ref(kill.ref))] if kill.command_line else [],
            )
        )
    if busy:
        gpus = ", ".join(f"GPU {i} {u}/{t} MiB" for i, u, t in busy)
        causes.append(Cause(45, f"The GPUs were already in use before the launch ({gpus}).", None))
    if diff is not None and diff[1]:
        first = diff[1][0]
        causes.append(
            Cause(
                40,
                f"The flags changed since attempt {diff[0]}, which came up: {diff_text(diff[1])}. "
                "A rejected flag would normally print an error to the log.",
                first.flag,
            )
        )
    return sorted(causes, key=lambda c: -c.score)


def _shell_error_cause(error: Observation, log: str | None) -> Cause | None:
    data = error.data
    kind, what = data.get("kind"), data.get("what", "").strip()
    lines = [(line, error.ref) for line in error.lines]
    never = "The server never started: "
    if kind == "nohup_failed":
        return Cause(
            100,
            f"nohup could not start `{what}`: {data.get('why', '')} (a wrong "
            "interpreter or venv path).",
            what,
            lines,
            never + f"nohup could not run {what}",
        )
    if kind == "no_module":
        return Cause(
            96,
            f"`{what or 'python'}` has no module {data.get('module')}: the launch ran "
            "under an interpreter or venv without SGLang.",
            what or None,
            lines,
            never + "the interpreter has no SGLang",
        )
    if kind == "not_found":
        return Cause(
            96,
            f"The shell could not find `{what}` (command not found).",
            what,
            lines,
            never + f"{what}: command not found",
        )
    if kind == "no_such_file":
        if log and (what == log or same_file(what, log)):
            folder = os.path.dirname(log)
            return Cause(
                98,
                f"The shell could not create the log {log}: its folder {folder} does "
                "not exist, so the launch never ran (the redirection failed first).",
                log,
                lines,
                never + "its log folder does not exist",
            )
        return Cause(
            95,
            f"`{what}` does not exist: No such file or directory.",
            what,
            lines,
            never + f"{what} does not exist",
        )
    if kind == "permission":
        return Cause(
            94, f"Permission denied for `{what}`.", what, lines, never + "permission denied"
        )
    if kind == "syntax":
        return Cause(
            93,
            f"The shell could not parse the command: {what}.",
            None,
            lines,
            never + "the shell could not parse the command",
        )
    if kind == "ssh_failed":
        return Cause(
            97,
            f"ssh did not reach the host: {what}.",
            None,
            lines,
            "The launch never reached the host: ssh failed",
        )
    return None


def _quoting_text(problem: shell.Problem, target: str | None) -> str:
    """Say which quote ended the `bash -c` string, when it reused the outer quote."""
    text = f"The shell read the command differently: {problem.detail}."
    if target and target[:1] in "'\"" and problem.level.via.startswith("ssh"):
        quote = target[0]
        other = '"' if quote == "'" else "'"
        text += (
            f" The {quote} before `{target[1:]}` closes the {quote}...{quote} string given to ssh "
            f"(quotes of one kind do not nest): quote the inner string with {other}...{other} "
            "or escape it."
        )
    return text


def _problem_target(problem: shell.Problem, text: str) -> str | None:
    """The raw text to highlight: the quote that ended a `bash -c` string too early and
    the word after it, or the quote that never closes."""
    if problem.kind == "outside_script":
        found = regex.search(r"-c\s+(['\"]\S*)", text)
        return found[1] if found else None
    if problem.level.parent is None:
        start = problem.span[0]
        return problem.level.text[start : start + 12].split("\n")[0]
    return None


def silent_incident(attempt: Attempt, causes: list[Cause], source: str) -> Incident:
    launch = attempt.launch
    command_lines = attempt.launch_lines(source)
    top = causes[0] if causes else None
    decisive, span = _pointed(command_lines, top.target if top else None)
    evidence: list[Line] = list(command_lines)
    for cause in causes:
        evidence.extend(evidence_line(source, ln, ref) for ln, ref in cause.lines)
    signals, signal_lines = attempt_signals(attempt, source)
    evidence.extend(signal_lines)
    unique = unique_lines(evidence)
    state = log_state(attempt)[0]
    title = {
        "missing": "The server died without writing a log",
        "empty": "The server died before writing a line to its log",
        "stale": "The server died without writing to its log",
    }.get(state, "The server died without an error in what the session saw")
    if top is not None and top.title and top.score >= 85:
        title = top.title
    never_python = state in ("missing", "empty", "stale") and not any(
        o.data.server for o in attempt.of_kind("processes")
    )
    explanation = f"Attempt {attempt.number} died"
    explanation += f". Most likely: {top.text}" if top is not None else "."
    explanation += " Seen: " + "; ".join(signals) + "."
    if never_python:
        explanation += (
            " The launch never reached Python (SGLang prints warnings within a second of starting)."
        )
    advice = [f"{rank}. {cause.text}" for rank, cause in enumerate(causes[:5], start=1)]
    advice.append("Run the same command in the foreground (no nohup, no &) to see its first error.")
    return Incident(
        rule_class="silent_death",
        rule=SILENT_RULE,
        title=title,
        severity="fatal",
        source=source,
        line=decisive.number if decisive else (command_lines[0].number if command_lines else 0),
        ranks=[],
        evidence=unique[:MAX_EVIDENCE],
        span=span,
        offending_flags=[c.target for c in causes[:1] if c.target and c.target.startswith("--")],
        explanation=explanation,
        advice=advice,
        command=launch.text,
        command_source="transcript",
    )


def _pointed(lines: list[Line], target: str | None) -> tuple[Line | None, tuple[int, int] | None]:
    """The command line holding `target`, and the target's span on it."""
    if not lines:
        return None, None
    if target:
        for line in lines:
            at = line.text.find(target)
            if at >= 0:
                return line, (at, at + len(target))
    return lines[0], None


def attempt_signals(
    attempt: Attempt, source: str, explained: bool = False
) -> tuple[list[str], list[Line]]:
    """Short statements of what the session saw, and the lines they rest on (`explained`:
    the log text already holds an incident)."""
    said: list[str] = []
    lines: list[Line] = []
    state, evidence = log_state(attempt, source)
    log = attempt.launch.log_path or "the log"
    if state != "unknown":
        said.append(
            {
                "missing": f"ls shows no {log}",
                "empty": f"{log} is empty",
                "stale": f"{log} is older than the launch",
                "present": f"{log} was read"
                + ("" if explained or attempt.of_kind("shell_error") else " and shows no error"),
            }[state]
        )
        lines.extend(evidence)
    for check in attempt.of_kind("processes"):
        if check.data.conclusive and not check.data.server:
            said.append(f"`{check.command}` finds no server process")
            lines.extend(evidence_line(source, n, check.ref) for n in check.lines[:3])
            if not check.lines and check.command_line:
                lines.append(evidence_line(source, check.command_line, command_ref(check.ref)))
            break
    for gpus in attempt.of_kind("gpus"):
        snapshot: GpuSnapshot = gpus.data
        if snapshot.idle():
            said.append(
                f"nvidia-smi shows {len(snapshot.gpus)} GPU(s) idle at "
                f"{max(g.used_mib for g in snapshot.gpus)} MiB"
            )
            lines.extend(evidence_line(source, n, gpus.ref) for n in snapshot.lines[:4])
            break
    polls = attempt.of_kind("health")
    failed = [p for p in polls if p.data.ok is False]
    if failed and not any(p.data.ok for p in polls):
        said.append(f"{len(failed)} health poll(s) never got an answer ({failed[-1].data.detail})")
        lines.extend(evidence_line(source, n, failed[-1].ref) for n in failed[-1].lines[:1])
    for report in attempt.of_kind("user")[:1]:
        said.append(f"the user said {report.data.strip()[:80]!r}")
        lines.extend(evidence_line(source, n, report.ref) for n in report.lines)
    if not said:
        said.append("the log text shows the error" if explained else "the server is gone")
    return said, lines


def log_state(attempt: Attempt, source: str = "") -> tuple[str, list[Line]]:
    """missing | empty | stale | present | unknown, from ls and the looks at the log."""
    log = attempt.launch.log_path
    if any(v.lines for v in attempt.views if v.how != "output"):
        return "present", []
    if not log:
        return "unknown", []
    state, lines = "unknown", []
    for observation in attempt.of_kind("ls"):
        result = observation.data
        mentioned = [e for e in result.entries if same_file(e.path, log)]
        gone = [m for m in result.missing if same_file(m[0], log) or _covers(m[0], log)]
        asked = any(_covers(a, log) for a in result.asked)
        found_lines = [
            evidence_line(source, e.line, observation.ref) for e in mentioned if e.line[1]
        ]
        if mentioned:
            entry = mentioned[-1]
            if entry.size == 0:
                state, lines = "empty", found_lines
            elif _older(entry.mtime, attempt.timestamp):
                state, lines = "stale", found_lines
            else:
                state, lines = "present", found_lines
        elif gone:
            state, lines = "missing", [evidence_line(source, g[1], observation.ref) for g in gone]
        elif asked:
            shown = [evidence_line(source, e.line, observation.ref) for e in result.entries]
            if not shown and observation.command_line:
                shown = [
                    evidence_line(source, observation.command_line, command_ref(observation.ref))
                ]
            state, lines = "missing", shown
    return state, lines


def _covers(asked: str, log: str) -> bool:
    """An ls argument that would list the log: the path, a glob of it, or its folder."""
    return same_file(asked, log) or asked.rstrip("/") == os.path.dirname(log)


def _folder_seen(attempt: Attempt, folder: str) -> bool:
    return any(
        os.path.dirname(e.path) == folder for o in attempt.of_kind("ls") for e in o.data.entries
    )


def _older(mtime: str | None, launched: str | None) -> bool:
    """True when ls's time is certainly before the launch (host clocks are local time)."""
    if not mtime or not launched:
        return False
    try:
        start = datetime.fromisoformat(launched.replace("Z", "+00:00"))
    except ValueError:
        return False
    found = regex.match(r"(\d{4})-(\d\d)-(\d\d)[ T](\d\d):(\d\d)", mtime)
    if found:
        moment = datetime(*map(int, found.groups()), tzinfo=timezone.utc)
    else:
        found = regex.match(r"([A-Z][a-z]{2})\s+(\d{1,2})\s+(\d{1,2}):(\d\d)", mtime)
        if not found or found[1] not in MONTHS:
            return False
        moment = datetime(
            start.year,
            MONTHS[found[1]],
            int(found[2]),
            int(found[3]),
            int(found[4]),
            tzinfo=timezone.utc,
        )
    if start.tzinfo is None:
        start = start.replace(tzinfo=timezone.utc)
    return (start - moment).total_seconds() > CLOCK_SLACK_HOURS * 3600

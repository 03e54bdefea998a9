"""Transcript-level findings: what the log rules cannot see because there was no log.

Given the attempts and the incidents their log text produced, decide each attempt's
outcome and add what only the session shows:

- `silent_death`: the attempt died and what the session saw of its log explains nothing
  (no log, an empty or stale one, a log without an error). The evidence (ls, pgrep,
  nvidia-smi, health polls, the user's words) is listed, and the likely causes are ranked,
  each pointing at the part of the launch command it blames: a shell error printed at
  launch, quoting that broke `bash -c '...'`, a log folder that does not exist,
  `nohup: failed to run command`, an interpreter other than the last working one, a kill.
- `gpus_occupied`: nvidia-smi showed the GPUs the launch uses already holding memory
  before the launch; it is the root cause of the `oom` that follows (whose memory edits
  are withdrawn: no flag makes room that another process holds).
- the attempts timeline, with the flag diff between the last attempt that came up and
  each failing one after it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timezone

import regex

from analyzer.core.model import Attempt as TimelineEntry
from analyzer.core.model import FlagChange, Incident, Line
from analyzer.sglang.launch_command import LaunchCommand
from analyzer.transcripts import shell
from analyzer.transcripts.attempts import Attempt, Observation, Session, command_ref, same_file
from analyzer.transcripts.diagnostics import GpuSnapshot, NumberedLine

Canonical = Callable[[str], "str | None"]

SILENT_RULE, GPUS_RULE = "session-silent-death", "session-gpus-occupied"
# Root-cause order beside the rules' priorities: GPUs held by another process explain the
# oom (75) that follows; a silent death ranks with the log rule of the same name (10).
PRIORITIES = {GPUS_RULE: 78, SILENT_RULE: 10}
BUSY_MIB = 1024
BUSY_FRACTION = 0.05
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


@dataclass
class Diagnosis:
    incidents: list[Incident]
    timeline: list[TimelineEntry]


def diagnose(
    session: Session,
    found: dict[int, list[Incident]],
    source: str,
    canonical: Canonical,
) -> Diagnosis:
    """Outcomes, transcript-level incidents and the timeline of one transcript."""
    incidents: list[Incident] = []
    timeline: list[TimelineEntry] = []
    last_working: tuple[Attempt, LaunchCommand | None] | None = None
    for attempt in session.attempts:
        own = found.get(attempt.number, [])
        outcome = _outcome(attempt, own)
        diff = _diff_with(last_working, attempt, canonical) if outcome == "failed" else None
        added = _findings(attempt, own, outcome, diff, last_working, session, source)
        incidents.extend(added)
        if diff is not None and diff[1]:
            note = f"Changed since attempt {diff[0]}, which came up: {_diff_text(diff[1])}"
            for incident in [*own, *added]:
                incident.advice.insert(0, note)
        timeline.append(_entry(attempt, outcome, diff, source, own))
        if outcome == "ready":
            last_working = (attempt, attempt.launch.parsed)
    return Diagnosis(incidents, timeline)


# --------------------------------------------------------------------------- outcome


def _outcome(attempt: Attempt, own: list[Incident]) -> str:
    if own:
        return "failed"
    if attempt.ready() and not attempt.of_kind("user"):
        return "ready"
    if _died(attempt):
        return "failed"
    if attempt.of_kind("kill"):
        return "stopped"
    return "unknown"


def _died(attempt: Attempt) -> bool:
    """Signs the server is gone: a report, no process, a shell error, no log, no answer."""
    if attempt.of_kind("user") or attempt.of_kind("shell_error") or attempt.of_kind("kernel_kill"):
        return True
    if any(o.data.conclusive and not o.data.server for o in attempt.of_kind("processes")):
        return True
    if _log_state(attempt)[0] in ("missing", "empty", "stale"):
        return True
    polls = [o.data.ok for o in attempt.of_kind("health")]
    return False in polls and True not in polls


# --------------------------------------------------------------------------- findings


def _findings(
    attempt: Attempt,
    own: list[Incident],
    outcome: str,
    diff: tuple[int, list[FlagChange]] | None,
    last_working: tuple[Attempt, LaunchCommand | None] | None,
    session: Session,
    source: str,
) -> list[Incident]:
    added: list[Incident] = []
    busy = _busy_gpus(attempt)
    oom = [i for i in own if i.rule_class == "oom"]
    if busy and oom:
        added.append(_gpus_incident(attempt, busy, source))
        for incident in oom:
            _withdraw_memory_edits(incident, attempt.number)
    if outcome == "failed" and not own:
        causes = _causes(attempt, busy, diff, last_working, session)
        added.append(_silent_incident(attempt, causes, source))
    for incident in added:
        incident.attempt = attempt.number
    return added


def _busy_gpus(attempt: Attempt) -> list[tuple[int, int, int]] | None:
    """(gpu, used MiB, total MiB) of the GPUs this launch uses that were busy before it."""
    before = attempt.gpus_before
    if before is None:
        return None
    snapshot: GpuSnapshot = before.data
    used = _gpus_used(attempt.launch.parsed, len(snapshot.gpus))
    busy = [
        (g.index, g.used_mib, g.total_mib)
        for g in snapshot.gpus
        if (used is None or g.index in used)
        and g.used_mib > max(BUSY_MIB, BUSY_FRACTION * g.total_mib)
    ]
    return busy or None


def _gpus_used(parsed: LaunchCommand | None, count: int) -> set[int] | None:
    """GPU indexes the launch runs on: CUDA_VISIBLE_DEVICES, else base id .. + tp x dp."""
    if parsed is None:
        return None
    visible = parsed.env.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        indexes = {int(v) for v in regex.findall(r"\d+", visible)}
        return indexes or None
    size = _int(_flag(parsed, "--tp-size", "--tp", "--tensor-parallel-size")) or 1
    size *= _int(_flag(parsed, "--dp-size", "--dp", "--data-parallel-size")) or 1
    base = _int(_flag(parsed, "--base-gpu-id")) or 0
    return set(range(base, min(base + size, max(count, base + size))))


def _flag(parsed: LaunchCommand, *names: str) -> str | None:
    for name in names:
        value = parsed.get(name)
        if value is not None:
            return value
    return None


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _gpus_incident(attempt: Attempt, busy: list[tuple[int, int, int]], source: str) -> Incident:
    before = attempt.gpus_before
    assert before is not None
    snapshot: GpuSnapshot = before.data
    gpus = ", ".join(f"GPU {i}: {used}/{total} MiB" for i, used, total in busy)
    indexes = {i for i, _, _ in busy}
    holders = [p for p in snapshot.processes if p.gpu is None or p.gpu in indexes]
    held_by = (
        ", ".join(sorted({f"pid {p.pid} ({p.name})" for p in holders}))
        or "processes nvidia-smi did not list here"
    )
    shown = [g.line for g in snapshot.gpus if g.index in indexes] + [p.line for p in holders]
    evidence = [_line(source, n, before.ref) for n in sorted(set(shown))]
    decisive = next(
        (ln for ln in evidence if regex.search(rf"\b{busy[0][1]}\s?MiB", ln.text)), evidence[0]
    )
    span = _span(decisive.text, rf"{busy[0][1]}\s?MiB\s*/\s*{busy[0][2]}\s?MiB")
    idle = [g.index for g in snapshot.gpus if g.used_mib <= 500 and g.index not in indexes]
    advice = [
        f"Stop what holds the GPUs ({held_by}) or wait for it to finish, check `nvidia-smi` shows "
        "them near 0 MiB, then rerun the same command.",
    ]
    if snapshot.indexed and len(idle) >= len(busy):
        chosen = ",".join(str(i) for i in idle[: max(len(busy), 1)])
        advice.append(f"Or run on the idle GPUs: CUDA_VISIBLE_DEVICES={chosen} before the command.")
    if not snapshot.indexed:
        advice.append(
            "GPU numbers are the order of the memory lines (the nvidia-smi output was filtered)."
        )
    return Incident(
        rule_class="gpus_occupied",
        rule=GPUS_RULE,
        title="The GPUs were already in use before the launch",
        severity="fatal",
        source=source,
        line=decisive.number,
        ranks=[],
        evidence=[*attempt.launch_lines(source)[:1], *evidence][:MAX_EVIDENCE],
        span=span,
        offending_flags=[],
        explanation=(
            f"Before attempt {attempt.number} started, nvidia-smi showed memory in use on the "
            f"GPUs it runs on ({gpus}), held by {held_by}. SGLang sizes its weights and KV cache "
            "from the memory it finds free, so the launch ran out of memory: the out-of-memory "
            "error that follows is a consequence, not a setting to tune."
        ),
        advice=advice,
        command=attempt.launch.text,
        command_source="transcript",
    )


def _withdraw_memory_edits(incident: Incident, number: int) -> None:
    note = (
        f"The GPUs were already occupied before attempt {number} (see the gpus_occupied "
        "incident): free them and rerun the same command."
    )
    if incident.corrected_command:
        note += " The memory-flag change is not offered: it would only hide that."
    incident.corrected_command = None
    incident.edits = []
    incident.advice.insert(0, note)


# --------------------------------------------------------------------------- silent death


def _causes(
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
    state, evidence = _log_state(attempt)
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
                f"The flags changed since attempt {diff[0]}, which came up: {_diff_text(diff[1])}. "
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


def _silent_incident(attempt: Attempt, causes: list[Cause], source: str) -> Incident:
    launch = attempt.launch
    command_lines = attempt.launch_lines(source)
    top = causes[0] if causes else None
    decisive, span = _pointed(command_lines, top.target if top else None)
    evidence: list[Line] = list(command_lines)
    for cause in causes:
        evidence.extend(_line(source, ln, ref) for ln, ref in cause.lines)
    signals, signal_lines = _signals(attempt, source)
    evidence.extend(signal_lines)
    unique = _unique(evidence)
    state = _log_state(attempt)[0]
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


def _signals(
    attempt: Attempt, source: str, explained: bool = False
) -> tuple[list[str], list[Line]]:
    """Short statements of what the session saw, and the lines they rest on (`explained`:
    the log text already holds an incident)."""
    said: list[str] = []
    lines: list[Line] = []
    state, evidence = _log_state(attempt, source)
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
            lines.extend(_line(source, n, check.ref) for n in check.lines[:3])
            if not check.lines and check.command_line:
                lines.append(_line(source, check.command_line, command_ref(check.ref)))
            break
    for gpus in attempt.of_kind("gpus"):
        snapshot: GpuSnapshot = gpus.data
        if snapshot.idle():
            said.append(
                f"nvidia-smi shows {len(snapshot.gpus)} GPU(s) idle at "
                f"{max(g.used_mib for g in snapshot.gpus)} MiB"
            )
            lines.extend(_line(source, n, gpus.ref) for n in snapshot.lines[:4])
            break
    polls = attempt.of_kind("health")
    failed = [p for p in polls if p.data.ok is False]
    if failed and not any(p.data.ok for p in polls):
        said.append(f"{len(failed)} health poll(s) never got an answer ({failed[-1].data.detail})")
        lines.extend(_line(source, n, failed[-1].ref) for n in failed[-1].lines[:1])
    for report in attempt.of_kind("user")[:1]:
        said.append(f"the user said {report.data.strip()[:80]!r}")
        lines.extend(_line(source, n, report.ref) for n in report.lines)
    if not said:
        said.append("the log text shows the error" if explained else "the server is gone")
    return said, lines


# --------------------------------------------------------------------------- the log's state


def _log_state(attempt: Attempt, source: str = "") -> tuple[str, list[Line]]:
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
        found_lines = [_line(source, e.line, observation.ref) for e in mentioned if e.line[1]]
        if mentioned:
            entry = mentioned[-1]
            if entry.size == 0:
                state, lines = "empty", found_lines
            elif _older(entry.mtime, attempt.timestamp):
                state, lines = "stale", found_lines
            else:
                state, lines = "present", found_lines
        elif gone:
            state, lines = "missing", [_line(source, g[1], observation.ref) for g in gone]
        elif asked:
            shown = [_line(source, e.line, observation.ref) for e in result.entries]
            if not shown and observation.command_line:
                shown = [_line(source, observation.command_line, command_ref(observation.ref))]
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


# --------------------------------------------------------------------------- flag diff


def _diff_with(
    last_working: tuple[Attempt, LaunchCommand | None] | None,
    attempt: Attempt,
    canonical: Canonical,
) -> tuple[int, list[FlagChange]] | None:
    if last_working is None or last_working[1] is None or attempt.launch.parsed is None:
        return None
    return last_working[0].number, flag_diff(last_working[1], attempt.launch.parsed, canonical)


def flag_diff(
    before: LaunchCommand, after: LaunchCommand, canonical: Canonical
) -> list[FlagChange]:
    """What changed from one launch to the next: entry point, environment, SGLang flags."""
    changes: list[FlagChange] = []
    if before.entry != after.entry:
        changes.append(FlagChange("entry", before.entry, after.entry))
    for name in sorted(set(before.env) | set(after.env)):
        if before.env.get(name) != after.env.get(name):
            changes.append(FlagChange(f"env {name}", before.env.get(name), after.env.get(name)))
    old, new = _settings(before, canonical), _settings(after, canonical)
    for flag, value in new.items():
        if old.get(flag, _ABSENT) != value:
            changes.append(FlagChange(flag, old.get(flag), value))
    for flag, value in old.items():
        if flag not in new:
            changes.append(FlagChange(flag, value, None))
    return changes


_ABSENT = object()


def _settings(command: LaunchCommand, canonical: Canonical) -> dict[str, str]:
    settings: dict[str, str] = {}
    for argument in command.arguments:
        flag = canonical(argument.flag) or argument.flag
        settings[flag] = argument.value if argument.value is not None else "(set)"
    return settings


def _diff_text(changes: list[FlagChange]) -> str:
    parts = []
    for change in changes:
        if change.before is None:
            parts.append(f"added {change.flag} {change.after}".replace(" (set)", ""))
        elif change.after is None:
            parts.append(f"removed {change.flag}")
        else:
            parts.append(f"{change.flag} {change.before} -> {change.after}")
    return "; ".join(parts)


# --------------------------------------------------------------------------- timeline


def _entry(
    attempt: Attempt,
    outcome: str,
    diff: tuple[int, list[FlagChange]] | None,
    source: str,
    found_here: list[Incident],
) -> TimelineEntry:
    lines = attempt.launch_lines(source)
    explained = bool(found_here)
    signals, _ = _signals(attempt, source, explained) if outcome != "ready" else (["came up"], [])
    return TimelineEntry(
        number=attempt.number,
        source=source,
        line=lines[0].number if lines else 0,
        ref=lines[0].ref if lines else None,
        timestamp=attempt.timestamp,
        command=attempt.launch.text,
        log_path=attempt.launch.log_path,
        outcome=outcome,
        signals=signals if outcome != "unknown" else [],
        diff_from=diff[0] if diff else None,
        flag_diff=diff[1] if diff else [],
    )


# --------------------------------------------------------------------------- lines


def _line(source: str, numbered: NumberedLine, ref: str | None) -> Line:
    number, text = numbered
    return Line(source, number, text, text, ref=ref)


def _span(text: str, pattern: str) -> tuple[int, int] | None:
    found = regex.search(pattern, text)
    return (found.start(), found.end()) if found else None


def _unique(lines: list[Line]) -> list[Line]:
    seen: set[tuple[int, str | None]] = set()
    kept = []
    for line in lines:
        key = (line.number, line.ref)
        if key not in seen:
            seen.add(key)
            kept.append(line)
    return kept

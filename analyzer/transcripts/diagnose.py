"""Transcript-level findings: what the log rules cannot see because there was no log.

Given the attempts and the incidents their log text produced, decide each attempt's
outcome and add what only the session shows:

- `silent_death` (silent_death.py): the attempt died and what the session saw of its log
  explains nothing (no log, an empty or stale one, a log without an error).
- `gpus_occupied`: nvidia-smi showed the GPUs the launch uses already holding memory
  before the launch; it is the root cause of the `oom` that follows (whose memory edits
  are withdrawn: no flag makes room that another process holds).
- the attempts timeline, with the flag diff between the last attempt that came up and
  each failing one after it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import regex

from analyzer.core.model import Attempt as TimelineEntry
from analyzer.core.model import FlagChange, Incident
from analyzer.sglang.launch_command import LaunchCommand
from analyzer.transcripts.command_outputs import GpuSnapshot
from analyzer.transcripts.session import Attempt, Session, diff_text, evidence_line, pattern_span
from analyzer.transcripts.silent_death import (
    MAX_EVIDENCE,
    SILENT_RULE,
    attempt_signals,
    log_state,
    silent_causes,
    silent_incident,
)

Canonical = Callable[[str], "str | None"]

GPUS_RULE = "session-gpus-occupied"
# Root-cause order beside the rules' priorities: GPUs held by another process explain the
# oom (75) that follows; a silent death ranks with the log rule of the same name (10).
PRIORITIES = {GPUS_RULE: 78, SILENT_RULE: 10}


BUSY_MIB = 1024


BUSY_FRACTION = 0.05


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
        outcome = _outcome(attempt, own, relaunched=attempt is not session.attempts[-1])
        diff = _diff_with(last_working, attempt, canonical) if outcome == "failed" else None
        added = _findings(attempt, own, outcome, diff, last_working, session, source)
        incidents.extend(added)
        if diff is not None and diff[1]:
            note = f"Changed since attempt {diff[0]}, which came up: {diff_text(diff[1])}"
            for incident in [*own, *added]:
                incident.advice.insert(0, note)
        timeline.append(_entry(attempt, outcome, diff, source, own))
        if outcome == "ready":
            last_working = (attempt, attempt.launch.parsed)
    return Diagnosis(incidents, timeline)


def _outcome(attempt: Attempt, own: list[Incident], relaunched: bool) -> str:
    """failed | ready | stopped | unknown. The user's words are never enough: a server that
    came up is ready unless something it left shows it gone after its last sign of life.
    Once a later launch followed, a server that came up is gone because the user stopped it
    unless it left evidence of its own death (a shell error, a kernel kill): no process,
    idle GPUs or an unanswered poll before the relaunch say nothing of how it ended."""
    if own:
        return "failed"
    alive = attempt.last_alive()
    signs = _death_signs(attempt) if alive is None or not relaunched else _own_death(attempt)
    deaths = [seq for seq in signs if alive is None or seq > alive]
    kills = [o.seq for o in attempt.of_kind("kill")]
    if deaths and not (kills and min(kills) < min(deaths)):  # gone, and not by a kill
        return "failed"
    if alive is not None:
        return "ready"
    return "stopped" if kills else "unknown"


def _own_death(attempt: Attempt) -> list[int]:
    """When (`seq`) the attempt left evidence of its own death: a shell error, a kernel kill."""
    return [o.seq for o in attempt.observations if o.kind in ("shell_error", "kernel_kill")]


def _death_signs(attempt: Attempt) -> list[int]:
    """When (`seq`) the session saw the server gone: a shell error, a kernel kill, no
    process, no log (or an empty or stale one), idle GPUs, health polls with no answer, a
    foreground launch that exited non-zero."""
    signs = _own_death(attempt)
    signs += [
        o.seq for o in attempt.of_kind("processes") if o.data.conclusive and not o.data.server
    ]
    signs += [o.seq for o in attempt.of_kind("gpus") if o.data.idle()]
    signs += [o.seq for o in attempt.of_kind("health") if o.data.ok is False]
    if log_state(attempt)[0] in ("missing", "empty", "stale"):
        signs.append(max((o.seq for o in attempt.of_kind("ls")), default=0))
    call = attempt.launch.call
    if not attempt.launch.background and call.exit_code not in (None, 0):
        signs.append(0)
    return signs


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
        cause = _gpus_incident(attempt, busy, source)
        added.append(cause)
        for incident in oom:
            _withdraw_memory_edits(incident, attempt.number)
            incident.cause = cause  # one OOM under the GPUs held, however many ranks print it
    if outcome == "failed" and not own:
        causes = silent_causes(attempt, busy, diff, last_working, session)
        added.append(silent_incident(attempt, causes, source))
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
    evidence = [evidence_line(source, n, before.ref) for n in sorted(set(shown))]
    decisive = next(
        (ln for ln in evidence if regex.search(rf"\b{busy[0][1]}\s?MiB", ln.text)), evidence[0]
    )
    span = pattern_span(decisive.text, rf"{busy[0][1]}\s?MiB\s*/\s*{busy[0][2]}\s?MiB")
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


def _entry(
    attempt: Attempt,
    outcome: str,
    diff: tuple[int, list[FlagChange]] | None,
    source: str,
    found_here: list[Incident],
) -> TimelineEntry:
    lines = attempt.launch_lines(source)
    explained = bool(found_here)
    signals, _ = (
        attempt_signals(attempt, source, explained) if outcome != "ready" else (["came up"], [])
    )
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

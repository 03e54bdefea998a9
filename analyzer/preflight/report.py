"""The pre-flight's one report: what would make the launch fail, each problem classed like the
post-mortem of the crash it prevents, and the corrected command. JSON fields are a contract."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from analyzer.core.model import Edit
from analyzer.formats.terminal import CONTROL


@dataclass
class Problem:
    """One finding. `check`: flags | speculative | condition | model | paths | weights | gpu |
    log | sglang | command; `rule_class` is the post-mortem's class (JSON `class`)."""

    check: str
    rule_class: str
    flags: list[str]
    message: str
    blocking: bool
    title: str = ""
    explanation: str = ""
    processes: list[dict[str, Any]] = field(default_factory=list)
    # what SGLang would print (the post-mortem's input) and a fix of the check's own
    log: str = field(default="", repr=False)
    edits: list[Edit] = field(default_factory=list, repr=False)
    corrected: str | None = field(default=None, repr=False)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "check": self.check,
            "class": self.rule_class,
            "flags": list(self.flags),
            "message": self.message,
            "blocking": self.blocking,
            "title": self.title,
            "explanation": self.explanation,
        }
        if self.processes:
            out["processes"] = self.processes
        return out


@dataclass
class PreflightReport:
    """The verdict on one command: problems in check order, the corrected command."""

    command: str
    sglang_version: str = ""
    problems: list[Problem] = field(default_factory=list)
    corrected: str | None = None
    edits: list[Edit] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    # SGLang's own verdict (status pass | fail | unavailable | timeout | skipped)
    sglang: dict[str, Any] = field(default_factory=dict)
    elapsed: float = 0.0

    @property
    def refused(self) -> bool:
        return any(p.blocking for p in self.problems)

    @property
    def exit_code(self) -> int:
        return 1 if self.refused else 0

    def as_json(self) -> dict[str, Any]:
        """Everything but the time taken: the same input gives byte-identical JSON."""
        return {
            "command": self.command,
            "sglang_version": self.sglang_version,
            "verdict": "refused" if self.refused else "passed",
            "problems": [p.as_json() for p in self.problems],
            "corrected_command": self.corrected,
            "edits": [e.as_json() for e in self.edits],
            "notes": list(self.notes),
            "sglang": dict(self.sglang),
        }


def render_report(report: PreflightReport, format: str) -> str:
    """`text` (render_text) or `json` (the report's JSON, indented)."""
    if format == "json":
        return json.dumps(report.as_json(), indent=2, ensure_ascii=False) + "\n"
    return render_text(report)


def render_text(report: PreflightReport) -> str:
    """Plain text: the problems, then the corrected command (shell-quoted by construction)."""
    verdict = "refused" if report.refused else "passed"
    out = [f"loganalyze pre-flight: {verdict} ({report.elapsed * 1000:.0f} ms)"]
    for problem in report.problems:
        mark = "ERROR" if problem.blocking else "warning"
        flags = f" {' '.join(problem.flags)}" if problem.flags else ""
        out.append(
            f"  {mark} [{problem.check}] {problem.rule_class}{flags}: {_clean(problem.message)}"
        )
    for note in report.notes:
        out.append(f"  - {_clean(note)}")
    status = report.sglang.get("status")
    if status and status != "skipped":
        version = report.sglang.get("version") or ""
        said = report.sglang.get("message") or ""
        name = f"sglang {version}" if version else "sglang"
        out.append(f"  {name}: {status}" + (f": {_clean(said)}" if said else ""))
    if report.refused:
        out.append("  command:")
        out.append(f"    {report.command}")
        if report.corrected:
            out.append("  corrected command:")
            out.append(f"    {report.corrected}")
            out.append("  edits: " + "; ".join(_edit_text(e) for e in report.edits))
    return "\n".join(out) + "\n"


def _clean(text: str) -> str:
    return CONTROL.sub("?", text)


def _edit_text(edit: Edit) -> str:
    if edit.op == "rename":
        return f"rename {edit.flag} -> {edit.to}"
    if edit.op == "remove":
        return f"remove {edit.flag}"
    return f"{edit.op} {edit.flag}" + (f" {edit.value}" if edit.value is not None else "")

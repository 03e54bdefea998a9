"""GitHub Actions workflow commands: one `::error` / `::warning` annotation per incident.

GitHub shows at most 10 annotations of a kind per step, so we emit at most `limit` and
summarise the rest in one `::notice`. `file=`/`line=` are only given when the incident's input
is a file inside the workspace (GitHub resolves them against the repository; a path outside it
would annotate nothing or, worse, a wrong file). Escaping follows the runner's rules: in the
message `%`, CR and LF; in properties also `:` and `,`.
"""

from __future__ import annotations

import os
from pathlib import Path

from analyzer.core.model import Incident, Report
from analyzer.formats.report_text import printable

MAX_ANNOTATIONS = 10
LEVELS = {"fatal": "error", "error": "error", "warning": "warning"}
MAX_MESSAGE = 4000


def escape_data(text: str) -> str:
    """A workflow-command message: `%`, CR and LF percent-encoded."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow-command property value: as a message, plus `:` and `,`."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def command(level: str, message: str, **properties: str) -> str:
    """One `::level k=v,...::message` line."""
    props = ",".join(f"{k}={escape_property(v)}" for k, v in properties.items() if v)
    return f"::{level}{' ' + props if props else ''}::{escape_data(message)}"


def workspace_path(source: str, workspace: Path) -> str | None:
    """The source as a path relative to the workspace, or None when it is not a file in it."""
    if source.startswith("<") or not source:
        return None
    path = Path(source)
    if not path.is_absolute():
        path = Path.cwd() / path
    try:
        relative = path.resolve().relative_to(workspace.resolve())
    except (ValueError, OSError):
        return None
    if not path.is_file():
        return None
    return relative.as_posix()


def default_workspace() -> Path:
    return Path(os.environ.get("GITHUB_WORKSPACE") or os.getcwd())


def annotation(incident: Incident, workspace: Path) -> str:
    level = LEVELS.get(incident.severity, "notice")
    title = printable(f"{incident.rule_class}: {incident.title}")
    properties: dict[str, str] = {"title": title[:200]}
    relative = workspace_path(incident.source, workspace)
    if relative is not None:
        properties = {"file": relative, "line": str(incident.line), **properties}
    return command(level, _message(incident, located=relative is not None), **properties)


def _message(incident: Incident, located: bool) -> str:
    parts = []
    if not located:
        parts.append(f"at {incident.source}:{incident.line}")
    if incident.ranks:
        parts.append(f"ranks: {', '.join(incident.ranks)}")
    if incident.explanation:
        parts.append(incident.explanation)
    if not incident.corrected_command and incident.advice:
        parts.append(incident.advice[0])
    text = printable("\n".join(parts))
    if not incident.corrected_command:
        return _cut(text, MAX_MESSAGE)
    # the corrected command is never cut: the text before it gives way
    corrected = printable(f"Corrected command: {incident.corrected_command}")
    room = max(MAX_MESSAGE - len(corrected) - 1, 0)
    return "\n".join(p for p in (_cut(text, room), corrected) if p)


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return f"{text[:limit]} … [cut: {len(text) - limit} more characters]"


def render_annotations(
    report: Report, workspace: Path | None = None, limit: int = MAX_ANNOTATIONS
) -> str:
    """The annotation lines for the report (empty when there is no incident)."""
    workspace = workspace or default_workspace()
    shown = report.incidents[:limit]
    lines = [annotation(i, workspace) for i in shown]
    rest = report.incidents[limit:]
    if rest:
        classes = sorted({i.rule_class for i in rest})
        lines.append(
            command(
                "notice",
                f"{len(rest)} more incident{'s' if len(rest) != 1 else ''} not annotated "
                f"({', '.join(classes)}); see the step summary or the HTML report.",
                title="loganalyze",
            )
        )
    return "".join(line + "\n" for line in lines)

"""One incident per cause.

The same failure printed by several GPUs, ranks, processes or retries of one attempt differs
only in its numbers (`GPU 0` / `GPU 1`, a pid, the bytes free): it is one incident listing
the ranks. A failure another incident explains (an OOM because other processes held the
GPUs) is kept under its cause: one incident per cause, `consequence_of` pointing at the
cause's place in the report.
"""

from __future__ import annotations

import regex

from analyzer.core.model import Incident

_NUMBER = regex.compile(r"0x[0-9a-fA-F]+|\d+(?:\.\d+)?")
_CAUSES = ("fatal", "error")


def number_consequences(incidents: list[Incident]) -> None:
    """Once the report's order is final: each consequence names its cause's index."""
    index = {id(incident): n for n, incident in enumerate(incidents)}
    for incident in incidents:
        if incident.cause is not None and id(incident.cause) in index:
            incident.consequence_of = index[id(incident.cause)]


def cause_key(incident: Incident) -> tuple | None:
    """What two fatal or error incidents of one input (or attempt) share when they are one
    failure: the rule and the decisive line but for its numbers, or the cause and class of
    a consequence. None for warnings and info findings."""
    if incident.severity not in _CAUSES:
        return None
    if incident.cause is not None:
        return ("consequence", id(incident.cause), incident.rule_class)
    line = next((ln for ln in incident.evidence if ln.number == incident.line), None)
    text = line.body if line else incident.title
    return ("repeat", incident.rule, _NUMBER.sub("#", text).strip())

"""The flag catalog's verdict on a whole launch command: what SGLang's parser would reject.

Every corrected command passes this before it is shown (analyzer/repair/correct.py), and
`verify` falls back to it when SGLang itself is not installed.
"""

from __future__ import annotations

from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.launch_command import LaunchCommand


def validate(command: LaunchCommand, catalog: FlagCatalog) -> list[str]:
    """What SGLang's parser would reject: unknown or ambiguous flags, bad values, duplicates."""
    problems: list[str] = []
    seen: set[str] = set()
    for argument in command.arguments:
        resolution = catalog.resolve(argument.flag)
        if resolution.spec is None:
            kind = "ambiguous" if resolution.kind == "ambiguous" else "unknown"
            problems.append(f"{argument.flag} is {kind} in {catalog.release}")
            continue
        problem = catalog.check_value(argument.flag, argument.value)
        if problem:
            problems.append(problem)
        long = resolution.spec.long
        if long in seen and resolution.spec.action != "append":
            problems.append(f"{long} is given twice")
        seen.add(long)
    return problems

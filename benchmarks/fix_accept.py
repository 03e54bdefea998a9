"""Corrected commands on real inputs: for each failure whose input shows a launch command, is
a corrected command offered, and does real SGLang accept it?

    LOGANALYZE_SGLANG_PYTHON=.sglang/venv/bin/python .venv/bin/python benchmarks/fix_accept.py
    ... benchmarks/fix_accept.py --json      # the same figures, machine-readable
    ... benchmarks/fix_accept.py --cases     # one line per case

The inputs: the wild corpus's cases that are not held out (fixtures/wild/held_out.txt; a held-out
sidecar is read no further than its `source` line) and the fixtures of fixtures/real and
fixtures/source, each whose expected class is a failure. A case counts when the root incident
(the first fatal/error one) carries a launch command the input shows (printed in the log, or
the fixture's recorded command given as `--command`); one rebuilt from a server_args dump gets
a table of its own. SGLang's verdict is `verify.verify_commands` (the check fix_fuzz runs: parsing, resolution
and check_server_args on CPU with config-only stand-in models), on the corrected command and on
the command as given (a failure past those checks, such as an OOM, leaves the given command
accepted too: a pass then proves the corrected command parses, no more).
An incident whose rule says a command edit is not the fix (`fix_outside_command`: other
processes holding the memory, the network, the install) counts apart, not as a miss.
SGLang accepts an empty command too, so acceptance alone is not the target: "accepted and
intent kept" counts a corrected command only when no edit dropped a typed flag that had to
go for want of a counterpart (the edit's `intent_lost`); "intent lost" counts the accepted
ones that did.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyzer.pipeline import Options, analyze  # noqa: E402
from analyzer.sglang.verify import sglang_python, verify_commands  # noqa: E402
from benchmarks.wild_score import NOT_A_FAILURE, WILD, read_held_out  # noqa: E402
from tests.fixture_cases import read_sidecar, sidecar_cases  # noqa: E402

FIXTURES = ROOT / "fixtures"
FIXTURE_FOLDERS = ("real", "source")
REBUILT = "reconstructed"  # correct.py: a command rebuilt from the server_args record
SOURCE_LINE = re.compile(r'^source\s*=\s*"(?P<source>[^"]*)"', re.MULTILINE)


@dataclass
class Case:
    name: str
    input: Path
    expected: str
    user_command: str | None = None
    rule: str = "-"
    command: str | None = None
    command_source: str | None = None
    corrected: str | None = None
    outside: bool = False
    given_accepted: bool | None = None
    accepted: bool | None = None
    message: str = ""
    lost: list[str] = field(default_factory=list)  # typed flags dropped with their intent


def _sidecar_source(sidecar: Path) -> str:
    """The `source` line alone: enough to skip a held-out case unread."""
    found = SOURCE_LINE.search(sidecar.read_text("utf-8"))
    return found["source"] if found else ""


def wild_cases() -> list[Case]:
    held = read_held_out()
    cases = []
    for sidecar in sorted(WILD.glob("*.toml")):
        if _sidecar_source(sidecar) in held:
            continue
        case = read_sidecar(sidecar)
        if "expect" not in case.data or case.expect.get("client_error"):
            continue
        expected = case.expect["class"]
        if expected in NOT_A_FAILURE:
            continue
        cases.append(Case(f"wild/{case.name}", case.input, expected))
    return cases


def fixture_cases() -> list[Case]:
    cases = []
    for folder in FIXTURE_FOLDERS:
        for case in sidecar_cases(FIXTURES / folder):
            if not case.expect or case.expect.get("class", "none") in NOT_A_FAILURE:
                continue
            cases.append(Case(case.id, case.input, case.expect["class"], case.user_command))
    return cases


def read(case: Case) -> None:
    """The analyzer's root incident of the case, its command and its corrected command."""
    report = analyze([str(case.input)], Options(command=case.user_command))
    causes = [i for i in report.incidents if i.severity in ("fatal", "error")]
    if not causes:
        return
    root = causes[0]
    case.rule = root.rule
    case.outside = root.fix_outside_command
    if root.command is None:
        return
    case.command, case.command_source = root.command, root.command_source
    case.corrected = root.corrected_command
    case.lost = [e.flag for e in root.edits if e.intent_lost]


def judge(cases: list[Case], python: str | None) -> None:
    """SGLang's verdict on every given and corrected command, in one SGLang process."""
    wanted = sorted({c for case in cases for c in (case.command, case.corrected) if c})
    verdicts = dict(zip(wanted, verify_commands(wanted, python), strict=True))
    for case in cases:
        if case.command:
            case.given_accepted = verdicts[case.command].status == "pass"
        if case.corrected:
            verdict = verdicts[case.corrected]
            case.accepted = verdict.status == "pass"
            case.message = verdict.message


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "-"


def shown(case: Case) -> bool:
    """The input shows the command (printed, or the fixture's as --command), not rebuilt."""
    return case.command is not None and case.command_source != REBUILT


def tally(group: list[Case]) -> dict[str, int]:
    shown_here = [c for c in group if shown(c)]
    fixable = [c for c in shown_here if not c.outside]
    refused = [c for c in fixable if c.given_accepted is False]
    return {
        "failures": len(group),
        "with_command": len(shown_here),
        "outside_command": len(shown_here) - len(fixable),
        "offered": sum(c.corrected is not None for c in fixable),
        "accepted": sum(bool(c.accepted) for c in fixable),
        "accepted_intent_kept": sum(bool(c.accepted) and not c.lost for c in fixable),
        "intent_lost": sum(bool(c.accepted) and bool(c.lost) for c in fixable),
        "given_accepted": sum(bool(c.given_accepted) for c in fixable),
        "fixable": len(fixable),
        # the failures SGLang's checks reproduce here: a pass then shows the fix works
        "given_rejected": len(refused),
        "accepted_of_rejected": sum(bool(c.accepted) for c in refused),
    }


def table(cases: list[Case], key: str) -> str:
    rows = [
        f"| {key} | failures | with a command | outside the command | offered | accepted | "
        "accepted and intent kept | intent lost | given accepted too | "
        "accepted where SGLang rejects the given |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    names = sorted({getattr(c, key) for c in cases if shown(c)})
    for name in [*names, "all"]:
        t = tally([c for c in cases if name == "all" or getattr(c, key) == name])
        rows.append(
            f"| {name} | {t['failures']} | {t['with_command']} | {t['outside_command']} | "
            f"{_share(t['offered'], t['fixable'])} | {_share(t['accepted'], t['fixable'])} | "
            f"{_share(t['accepted_intent_kept'], t['fixable'])} | "
            f"{_share(t['intent_lost'], t['fixable'])} | "
            f"{t['given_accepted']} | {_share(t['accepted_of_rejected'], t['given_rejected'])} |"
        )
    return "\n".join(rows)


def rebuilt_only(cases: list[Case]) -> list[Case]:
    """The cases whose command was rebuilt from server_args, counted as if shown."""
    return [replace(c, command_source=None) for c in cases if c.command_source == REBUILT]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="machine-readable figures")
    parser.add_argument("--cases", action="store_true", help="one line per case")
    parser.add_argument("--python", default=None, help="SGLang's python (default: as verify)")
    args = parser.parse_args(argv)
    python = args.python or sglang_python()
    if python is None:
        print("fix_accept: no SGLang (install loganalyze[sglang] or set LOGANALYZE_SGLANG_PYTHON)")
        return 2
    started = time.monotonic()
    cases = [*wild_cases(), *fixture_cases()]
    for case in cases:
        read(case)
    judge(cases, python)
    if args.json:
        by_class = {
            name: tally([c for c in cases if c.expected == name])
            for name in sorted({c.expected for c in cases})
        }
        rebuilt = tally(rebuilt_only(cases))
        figures = {"all": tally(cases), "by_class": by_class, "rebuilt": rebuilt}
        print(json.dumps(figures, indent=2))
        return 0
    if args.cases:
        for case in cases:
            if not case.command:
                continue
            rebuilt = " (rebuilt from server_args)" if case.command_source == REBUILT else ""
            mark = "out" if case.outside else ("ok" if case.accepted else "--")
            mark = "~~" if case.accepted and case.lost else mark
            print(f"{mark:3} {case.name} [{case.expected} / {case.rule}]{rebuilt}")
            if case.lost:
                print(f"      intent lost: {', '.join(case.lost)}")
            if not case.outside and not case.accepted:
                print(f"      given: {case.command}")
                print(f"      corrected: {case.corrected}")
                if case.message:
                    print(f"      sglang: {case.message[:300]}")
        print()
    print("By expected class:\n" + table(cases, "expected"))
    print("\nBy rule of the root incident:\n" + table(cases, "rule"))
    print("\nCommands rebuilt from a server_args record only (not counted above):")
    print(table(rebuilt_only(cases), "expected"))
    print(f"\n{len(cases)} failures read in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

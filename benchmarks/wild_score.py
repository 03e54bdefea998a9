"""Scoreboard of the wild corpus: what users really paste, measured against the analyzer.

    python benchmarks/wild_score.py            # the whole corpus, its held-out third, the rest
    python benchmarks/wild_score.py --json     # the same figures, machine-readable
    python benchmarks/wild_score.py --cases    # one line per case: expected, predicted, ok

The verdict of an input is the class of its root fatal/error incident, `client_error` when
the only finding is a client's failure, else `none`. Class top-1 counts only the cases whose
paste shows its cause (`cause_in_paste`, true unless the sidecar says otherwise); for a paste
cut before its cause the right answer is an incident that claims no cause (`unknown`,
`startup_stall`, `silent_death`), an `error`-severity incident (the analyzer's presumption from
the phase reached, as for a traceback cut before its exception line) or the thread's class,
never `none` nor a fatal incident of another cause: the `cut` column. Flags: on the cases whose sidecar names
flags, the share where every named flag is among the root incident's `offending_flags` (the
client's failure, for a `client_error` verdict).
Fatal precision and the per-class table count the negative corpus (fixtures/negative) too:
of the inputs given a fatal incident, the share that really show a server failure.

The held-out third is fixed by fixtures/wild/held_out.txt (chosen by a hash of `source`
before any rule was written for the corpus); `held_out_sources` recomputes it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyzer.pipeline import Options, analyze  # noqa: E402
from tests.fixture_cases import sidecar_cases  # noqa: E402

WILD = ROOT / "fixtures" / "wild"
NEGATIVE = ROOT / "fixtures" / "negative"
HELD_OUT = WILD / "held_out.txt"
NOT_A_FAILURE = ("none", "client_error")
# the verdicts that show a failure without claiming its cause
NO_CAUSE = ("unknown", "startup_stall", "silent_death")


@dataclass
class Case:
    name: str
    input: Path
    source: str
    expected: str
    flags: list[str]
    confidence: str
    negative: bool = False
    cause_in_paste: bool = True
    predicted: str = "none"
    predicted_flags: list[str] = field(default_factory=list)
    fatal: bool = False
    severity: str = ""  # of the root fatal/error incident


def held_out_sources(sources: set[str]) -> set[str]:
    """A third of the threads, by sha256 of `source` (stable, independent of the rules)."""
    return {s for s in sources if int(hashlib.sha256(s.encode()).hexdigest(), 16) % 3 == 0}


def read_held_out() -> set[str]:
    """The committed split: one `source` per line, `#` comments."""
    lines = HELD_OUT.read_text("utf-8").splitlines() if HELD_OUT.exists() else []
    return {ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")}


def load_cases(folder: Path, negative: bool = False) -> list[Case]:
    cases = []
    for case in sidecar_cases(folder):
        fixture, expect = case.fixture, case.expect
        expected = "client_error" if expect.get("client_error") else expect["class"]
        cases.append(
            Case(
                case.name,
                case.input,
                fixture.get("source", ""),
                expected,
                list(expect.get("flags", [])),
                fixture.get("confidence", "high"),
                negative,
                bool(expect.get("cause_in_paste", True)),
            )
        )
    return cases


def predict(case: Case) -> None:
    """The analyzer's verdict on one case, as the scoreboard reads it."""
    report = analyze([str(case.input)], Options())
    causes = [i for i in report.incidents if i.severity in ("fatal", "error")]
    if causes:
        case.predicted = causes[0].rule_class
        case.severity = causes[0].severity
        case.predicted_flags = list(causes[0].offending_flags)
    elif clients := [i for i in report.incidents if i.rule_class == "client_error"]:
        case.predicted = "client_error"
        case.predicted_flags = list(clients[0].offending_flags)
    case.fatal = any(i.severity == "fatal" for i in report.incidents)


def answer_right(case: Case) -> bool:
    """The verdict is the expected class; for a cut paste, see `cut_answer_right`."""
    return case.predicted == case.expected if case.cause_in_paste else cut_answer_right(case)


def cut_answer_right(case: Case) -> bool:
    """A paste cut before its cause: an incident that claims no cause, or the right one."""
    if case.predicted in NOT_A_FAILURE:
        return False
    return case.predicted in (case.expected, *NO_CAUSE) or case.severity == "error"


def score(cases: list[Case]) -> dict:
    """Class top-1 where the paste shows its cause, the cut pastes' answers, flags, per-class
    recall and precision of a set of cases."""
    shown = [c for c in cases if c.cause_in_paste]
    cut = [c for c in cases if not c.cause_in_paste]
    total = len(shown)
    right = sum(c.predicted == c.expected for c in shown)
    with_flags = [c for c in cases if c.flags]
    flags_right = sum(set(c.flags) <= set(c.predicted_flags) for c in with_flags)
    classes = sorted({c.expected for c in shown} | {c.predicted for c in shown})
    per_class = {}
    for name in classes:
        expected = [c for c in shown if c.expected == name]
        predicted = [c for c in shown if c.predicted == name]
        hits = sum(c.predicted == name for c in expected)
        per_class[name] = {
            "cases": len(expected),
            "recall": _share(hits, len(expected)),
            "precision": _share(hits, len(predicted)),
        }
    return {
        "cases": len(cases),
        "class_cases": total,
        "class_top1": _share(right, total),
        "cut_cases": len(cut),
        "cut_answer": _share(sum(cut_answer_right(c) for c in cut), len(cut)),
        "flags_cases": len(with_flags),
        "flags": _share(flags_right, len(with_flags)),
        "no_incident_on_failures": sum(
            c.predicted == "none" and c.expected not in NOT_A_FAILURE for c in cases
        ),
        "per_class": per_class,
    }


def fatal_precision(cases: list[Case]) -> dict:
    fatal = [c for c in cases if c.fatal]
    true = sum(c.expected not in NOT_A_FAILURE for c in fatal)
    return {"fatal_incidents": len(fatal), "precision": _share(true, len(fatal))}


def _share(part: int, whole: int) -> float | None:
    return round(part / whole, 4) if whole else None


def run() -> dict:
    wild = load_cases(WILD)
    negatives = load_cases(NEGATIVE, negative=True)
    for case in [*wild, *negatives]:
        predict(case)
    held = read_held_out()
    held_cases = [c for c in wild if c.source in held]
    rest = [c for c in wild if c.source not in held]
    return {
        "all": score(wild),
        "held_out": score(held_cases),
        "held_out_high": score([c for c in held_cases if c.confidence == "high"]),
        "not_held_out": score(rest),
        "negatives": score(negatives),
        "with_negatives": score([*wild, *negatives]),
        "fatal_precision": fatal_precision([*wild, *negatives]),
        "cases": [
            {
                "case": c.name,
                "held_out": c.source in held,
                "expected": c.expected,
                "predicted": c.predicted,
                "flags": c.flags,
                "predicted_flags": c.predicted_flags,
                "cause_in_paste": c.cause_in_paste,
                "ok": answer_right(c),
            }
            for c in [*wild, *negatives]
        ],
    }


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{100 * value:.0f}%"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    """A scoreboard's Markdown table: the first column names, the others right-aligned."""
    lines = [header, ["---", *["---:"] * (len(header) - 1)], *rows]
    return ["| " + " | ".join(cells) + " |" for cells in lines]


def print_scoreboard(
    result: dict, as_json: bool, cases: bool, render: Callable[[dict], str]
) -> None:
    """A scoreboard as JSON, one line per case (`H` held out, `c` cut before its cause), or
    its tables."""
    if as_json:
        print(json.dumps(result, indent=2, sort_keys=True))
    elif cases:
        for c in result["cases"]:
            ok = "ok " if c["ok"] else "BAD"
            marks = ("H" if c["held_out"] else " ") + (" " if c["cause_in_paste"] else "c")
            print(f"{ok} {marks} {c['expected']:<22} {c['predicted']:<22} {c['case']}")
    else:
        print(render(result), end="")


def render(result: dict) -> str:
    header = ["set", "cases", "class top-1, cause in paste (cases)",
              "cut before cause: no wrong cause (cases)", "flags (cases)", "failures with no incident"]  # fmt: skip
    sets = []
    for name in ("all", "not_held_out", "held_out", "held_out_high", "negatives"):
        s = result[name]
        sets.append([
            name, str(s["cases"]), f"{_pct(s['class_top1'])} ({s['class_cases']})",
            f"{_pct(s['cut_answer'])} ({s['cut_cases']})", f"{_pct(s['flags'])} ({s['flags_cases']})",
            str(s["no_incident_on_failures"]),
        ])  # fmt: skip
    rows = table(header, sets)
    fp = result["fatal_precision"]
    rows.append("")
    rows.append(
        f"fatal-incident precision (wild + negatives): {_pct(fp['precision'])} "
        f"of {fp['fatal_incidents']} inputs given a fatal incident"
    )
    rows.append("")
    rows.append(
        "per class (cases whose paste shows the cause), wild + negatives, and the held-out third alone:"
    )
    rows.append("")
    held = result["held_out"]["per_class"]
    classes = []
    for name, s in result["with_negatives"]["per_class"].items():
        h = held.get(name, {"cases": 0, "recall": None, "precision": None})
        classes.append([
            f"`{name}`", str(s["cases"]), _pct(s["recall"]), _pct(s["precision"]),
            str(h["cases"]), _pct(h["recall"]), _pct(h["precision"]),
        ])  # fmt: skip
    rows += table(
        ["class", "cases", "recall", "precision", "held out", "recall", "precision"], classes
    )
    return "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cases", action="store_true")
    args = parser.parse_args()
    print_scoreboard(run(), args.json, args.cases, render)


if __name__ == "__main__":
    main()

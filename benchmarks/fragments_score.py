"""Scoreboard of the fragments corpus: catalog messages in the shapes users paste them.

    python benchmarks/fragments_score.py            # the figures, not-held-out and held-out apart
    python benchmarks/fragments_score.py --json     # the same, machine-readable
    python benchmarks/fragments_score.py --cases    # one line per case of the part not held out

Silent: a failure paste given no fatal or error incident (`none`, or only a client's
failure). Class: top-1 on the failure pastes that show their cause; a paste cut before its
cause is right with an incident that claims no cause (benchmarks/wild_score.py:
cut_answer_right). Negatives (`neg_*`, class `none`) are clean when they get no fatal or error
incident. The verdict of an input is read as for the wild corpus (wild_score.predict).

The held-out third is fixed by fixtures/fragments/held_out.txt (sha256 of the case name % 3,
written from the names before the cases); its cases are listed only with --held-out-cases.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.wild_score import (  # noqa: E402
    NOT_A_FAILURE,
    Case,
    _pct,
    _share,
    answer_right,
    load_cases,
    predict,
    print_scoreboard,
    table,
)
from tests.fixture_cases import sidecar_cases  # noqa: E402

FRAGMENTS = ROOT / "fixtures" / "fragments"
HELD_OUT = FRAGMENTS / "held_out.txt"


def held_out_names(names: set[str]) -> set[str]:
    """A third of the cases, by sha256 of the case name (stable, independent of the rules)."""
    return {n for n in names if int(hashlib.sha256(n.encode()).hexdigest(), 16) % 3 == 0}


def read_held_out() -> set[str]:
    lines = HELD_OUT.read_text("utf-8").splitlines() if HELD_OUT.exists() else []
    return {ln.strip() for ln in lines if ln.strip() and not ln.startswith("#")}


def shapes() -> dict[str, str]:
    """Each case's paste shape, from its sidecar."""
    return {c.name: c.fixture.get("shape", "") for c in sidecar_cases(FRAGMENTS)}


def figures(cases: list[Case], shape_of: dict[str, str] | None = None) -> dict:
    failures = [c for c in cases if c.expected != "none"]
    negatives = [c for c in cases if c.expected == "none"]
    silent = [c for c in failures if c.predicted in NOT_A_FAILURE]
    shown = [c for c in failures if c.cause_in_paste]
    cut = [c for c in failures if not c.cause_in_paste]
    clean = sum(c.predicted in NOT_A_FAILURE for c in negatives)
    result = {
        "failures": len(failures),
        "silent": len(silent),
        "class_cases": len(shown),
        "class_top1": _share(sum(answer_right(c) for c in shown), len(shown)),
        "cut_cases": len(cut),
        "cut_answer": _share(sum(answer_right(c) for c in cut), len(cut)),
        "negatives": len(negatives),
        "negatives_clean": _share(clean, len(negatives)),
    }
    if shape_of is not None:
        result["silent_by_shape"] = dict(sorted(Counter(shape_of[c.name] for c in silent).items()))
    return result


def run(with_held_out_cases: bool = False) -> dict:
    cases = load_cases(FRAGMENTS)
    for case in cases:
        predict(case)
    held = read_held_out()
    shape_of = shapes()
    rest = [c for c in cases if c.name not in held]
    listed = cases if with_held_out_cases else rest
    return {
        "not_held_out": figures(rest, shape_of),
        "held_out": figures([c for c in cases if c.name in held]),
        "all": figures(cases),
        "cases": [
            {
                "case": c.name,
                "held_out": c.name in held,
                "expected": c.expected,
                "predicted": c.predicted,
                "cause_in_paste": c.cause_in_paste,
                "ok": answer_right(c),
            }
            for c in listed
        ],
    }


def render(result: dict) -> str:
    header = ["set", "failure pastes", "silent", "class top-1, cause in paste (cases)",
              "cut before cause: no wrong cause (cases)", "negatives", "negatives clean"]  # fmt: skip
    sets = []
    for name in ("not_held_out", "held_out", "all"):
        s = result[name]
        sets.append([
            name, str(s["failures"]), str(s["silent"]), f"{_pct(s['class_top1'])} ({s['class_cases']})",
            f"{_pct(s['cut_answer'])} ({s['cut_cases']})", str(s["negatives"]),
            _pct(s["negatives_clean"]),
        ])  # fmt: skip
    rows = table(header, sets)
    by_shape = result["not_held_out"]["silent_by_shape"]
    if by_shape:
        rows.append("")
        rows.append(
            "silent, by shape (not held out): "
            + ", ".join(f"{shape} {count}" for shape, count in by_shape.items())
        )
    return "\n".join(rows) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--cases", action="store_true")
    parser.add_argument("--held-out-cases", action="store_true", help="list held-out cases too")
    args = parser.parse_args()
    result = run(with_held_out_cases=args.held_out_cases)
    print_scoreboard(result, args.json, args.cases, render)


if __name__ == "__main__":
    main()

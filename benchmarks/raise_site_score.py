"""Class and offending flags on real SGLang failures, with and without the hand rules.

    python benchmarks/raise_site_score.py [--cases]

Real failures are the fixtures of fixtures/real/ and fixtures/versions/ (real runs of
shipped releases). Two figures each:

- the analyzer as shipped: the root incident's class against the sidecar's class
  (top-1), and its offending flags against the sidecar's `flags`, exactly;
- the error catalog alone (no hand rule at all): on the failures that end in a traceback
  whose raise site the catalog finds, the class its family gives and the flags the site
  blames. This is what classifies an error no hand rule knows.

Goals (issue 17): class top-1 >= 97%, offending flags >= 95% for the analyzer as shipped.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyzer.core.model import Incident, severity_rank  # noqa: E402
from analyzer.pipeline import Options, analyze  # noqa: E402
from tests.fixture_cases import Case, fixture_cases  # noqa: E402

REAL_FOLDERS = ("real", "versions")


@dataclass
class Score:
    """Hits out of cases, for the class and for the flags (cases whose sidecar names flags)."""

    cases: int = 0
    class_hits: int = 0
    flag_cases: int = 0
    flag_hits: int = 0

    def add(self, class_ok: bool, flags_ok: bool | None) -> None:
        self.cases += 1
        self.class_hits += class_ok
        if flags_ok is not None:
            self.flag_cases += 1
            self.flag_hits += flags_ok

    @property
    def class_share(self) -> float:
        return self.class_hits / self.cases if self.cases else 0.0

    @property
    def flag_share(self) -> float:
        return self.flag_hits / self.flag_cases if self.flag_cases else 0.0

    def line(self, name: str) -> str:
        return (
            f"{name}: class top-1 {self.class_hits}/{self.cases} ({self.class_share:.1%}), "
            f"offending flags {self.flag_hits}/{self.flag_cases} ({self.flag_share:.1%})"
        )


def real_cases() -> list[Case]:
    return [c for c in fixture_cases() if c.sidecar.parent.name in REAL_FOLDERS]


def _root(incidents: list[Incident]) -> Incident | None:
    """The first failure (warnings never explain one)."""
    failures = [i for i in incidents if severity_rank(i.severity) < severity_rank("warning")]
    return failures[0] if failures else None


def _judge(case: Case, root: Incident | None) -> tuple[bool, bool | None]:
    expect = case.expect
    predicted = root.rule_class if root else "none"
    flags_ok = None
    if "flags" in expect:
        flags_ok = root is not None and sorted(root.offending_flags) == sorted(expect["flags"])
    return predicted == expect["class"], flags_ok


def score(cases: list[Case], verbose: bool = False) -> tuple[Score, Score]:
    """(the analyzer as shipped, the error catalog alone)."""
    shipped, alone = Score(), Score()
    for case in cases:
        options = Options(command=case.user_command)
        root = _root(analyze([str(case.input)], options).incidents)
        class_ok, flags_ok = _judge(case, root)
        shipped.add(class_ok, flags_ok)
        bare = _root(analyze([str(case.input)], options, rules=[]).incidents)
        placed = bare is not None and bare.raise_site is not None
        if placed:
            alone.add(*_judge(case, bare))
        if verbose:
            site = bare.raise_site if placed and bare and bare.raise_site else None
            print(
                f"{case.id:60} expect {case.expect['class']:22} got {root.rule_class if root else 'none':22}"
                f" {'ok' if class_ok else 'MISS'} flags {flags_ok}"
                + (
                    f" | alone {bare.rule_class} {bare.offending_flags} at {site.file}:{site.line}"
                    if site and bare
                    else ""
                )
            )
    return shipped, alone


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", action="store_true", help="one line per fixture")
    args = parser.parse_args()
    shipped, alone = score(real_cases(), args.cases)
    print(shipped.line("analyzer as shipped"))
    print(alone.line("error catalog alone (failures with a raise site)"))


if __name__ == "__main__":
    main()

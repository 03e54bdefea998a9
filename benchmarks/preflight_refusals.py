"""How many real SGLang startup failures the pre-flight refuses for their real reason.

    python benchmarks/preflight_refusals.py            # without SGLang (the checks alone)
    python benchmarks/preflight_refusals.py --sglang   # with $LOGANALYZE_SGLANG_PYTHON

Every sidecar of fixtures/real/ and fixtures/versions/ holds the command real SGLang ran and
the class (and flags) of the failure it printed. Each command goes through the pre-flight
(analyzer/preflight/) from the repository root, with the sidecar's release. A fixture is
refused for its real reason when a blocking problem has the failure's class and, where the
sidecar names flags, at least one of them. Only failures the command and its folders decide
count towards the score; the others (the install, a busy port, a kill from outside, the
tokenizer a config-only fixture folder lacks) happen after the launch and must not be
refused for another reason: those are counted as false refusals.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyzer.preflight.check import preflight_many  # noqa: E402
from analyzer.preflight.folders import PATH_FLAGS  # noqa: E402

FOLDERS = ("real", "versions")
# failures the command's flags and the folders it names decide before anything starts
DECIDED = (
    "argparse_invalid",
    "argparse_unrecognized",
    "config_validation",
    "incompatible_flags",
    "spec_assertion",
    "hidden_dim_mismatch",
    "weight_key_mismatch",
)


def warned(data: dict, report) -> bool:
    """A refusal for a warning the post-mortem gives on the same command ([[warnings]])."""
    wanted = [set(w.get("flags") or ()) for w in data.get("warnings", [])]
    return any(p.blocking and set(p.flags) == flags for p in report.problems for flags in wanted)


def cases() -> list[tuple[str, dict, dict]]:
    found = []
    for folder in FOLDERS:
        for sidecar in sorted((ROOT / "fixtures" / folder).glob("*.toml")):
            data = tomllib.loads(sidecar.read_text("utf-8"))
            fixture, expect = data.get("fixture", {}), data.get("expect", {})
            if fixture.get("command") and expect.get("class") not in (None, "none"):
                found.append((f"{folder}/{sidecar.stem}", data, expect))
    return found


def decided(expect: dict) -> bool:
    """Whether the command and its folders decide this failure."""
    if expect["class"] in DECIDED:
        return True
    return expect["class"] == "model_load" and bool(
        set(expect.get("flags") or ()) & set(PATH_FLAGS)
    )


def main() -> int:
    cli = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    cli.add_argument("--sglang", action="store_true", help="also ask the installed SGLang")
    cli.add_argument("-v", "--verbose", action="store_true", help="list every miss")
    args = cli.parse_args()
    scored: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    after: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    misses = []
    found = cases()
    reports = {}
    for version in sorted({d["fixture"].get("sglang_version") or "" for _, d, _ in found}):
        group = [
            (n, d) for n, d, _ in found if (d["fixture"].get("sglang_version") or "") == version
        ]
        commands = [d["fixture"]["command"] for _, d in group]
        answers = preflight_many(
            commands,
            ROOT,
            args.sglang,
            sglang_version=version or None,
            env={"PATH": ""},
            timeout=300,
        )
        reports.update({n: r for (n, _), r in zip(group, answers, strict=True)})
    for name, data, expect in found:
        report = reports[name]
        wanted = set(expect.get("flags") or ())
        right = any(
            p.blocking and p.rule_class == expect["class"] and (not wanted or wanted & set(p.flags))
            for p in report.problems
        )
        if decided(expect):
            scored[expect["class"]][0] += right
            scored[expect["class"]][1] += 1
            if not right:
                misses.append((name, expect, report))
        else:
            wrong = report.refused and not right and not warned(data, report)
            after[expect["class"]][0] += wrong
            after[expect["class"]][1] += 1
            if wrong:
                misses.append((name, expect, report))
    mode = "with SGLang" if args.sglang else "without SGLang"
    print(f"pre-flight refusals for the real reason ({mode})")
    total = [0, 0]
    for rule_class, (right, count) in sorted(scored.items()):
        total[0] += right
        total[1] += count
        print(f"  {rule_class:<24} {right:>3}/{count:<3} {100 * right / count:5.1f}%")
    print(f"  {'all decided':<24} {total[0]:>3}/{total[1]:<3} {100 * total[0] / total[1]:5.1f}%")
    print("failures after the launch: refused for another reason (must be 0)")
    for rule_class, (wrong, count) in sorted(after.items()):
        print(f"  {rule_class:<24} {wrong:>3}/{count:<3}")
    if args.verbose:
        for name, expect, report in misses:
            got = [(p.rule_class, p.flags) for p in report.problems if p.blocking]
            print(f"miss {name}: want {expect['class']} {expect.get('flags')}; got {got}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

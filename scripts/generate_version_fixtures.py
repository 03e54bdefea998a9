"""Generate fixtures/versions/: real CPU runs of SGLang releases other than the newest.

Which SGLang wrote a log decides which flags are wrong, so the analyzer picks a flag
catalog per input (analyzer/sglang/releases.py) and explains version mismatches from the
flag history (analyzer/sglang/flag_history.py). These fixtures are the real thing to test that
on: the same launches run by each shipped release, installed by scripts/install-sglang.sh.

    bash scripts/install-sglang.sh
    .sglang/venv/bin/python scripts/generate_version_fixtures.py [--only NAME...]

Each run is `python -m sglang.launch_server <args>` with the release's folder first on
PYTHONPATH (0.5.23 is the venv's own), cwd = repo root, the same clean environment and
timeout as scripts/generate_real_fixtures.py. The corrected command of each case is
verified by that same release (parsing, resolution, checks: analyzer/sglang/verify.py) before
`verified = true` is written. Sidecars hold what a correct analyzer must conclude,
`catalog_version` included: the catalog it must pick from the log alone.
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))

import generate_real_fixtures as real  # noqa: E402

from analyzer.sglang.verify import verify_command  # noqa: E402

OUT = ROOT / "fixtures" / "versions"
RELEASES = ROOT / os.environ.get("LOGANALYZE_SGLANG_HOME", ".sglang") / "releases"
NEWEST = "0.5.23"
TARGET = real.TARGET
EAGLE = real.EAGLE
SPEC_FLAGS = (
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
    "--speculative-num-steps",
)


@dataclass(frozen=True)
class VersionCase:
    """One launch on one release; `decisive` is a regex for the decisive line."""

    release: str
    name: str
    args: str
    expect_class: str
    decisive: str
    flags: tuple[str, ...]
    corrected: str
    note: str
    advice: str | None = None
    # False where the release cannot validate on CPU (0.5.6.post2 imports sgl_kernel)
    verifiable: bool = True

    @property
    def id(self) -> str:
        return f"sglang-{self.release}_{self.name}"


def _spec(release: str) -> VersionCase:
    return VersionCase(
        release,
        "eagle_topk_without_steps",
        f"{TARGET} {EAGLE} --speculative-eagle-topk 4 --speculative-num-draft-tokens 8",
        "spec_assertion",
        r"^AssertionError",
        SPEC_FLAGS,
        f"{TARGET} {EAGLE} --speculative-eagle-topk 4 --speculative-num-draft-tokens 8 "
        "--speculative-num-steps 3",
        "The speculative-args assertion of this release; its traceback line numbers are the "
        "only clue to the version.",
    )


CASES: tuple[VersionCase, ...] = (
    # 0.5.6.post2 imports sgl_kernel (GPU kernels) before it checks the speculative args
    *(_spec(release) for release in ("0.5.10.post1", "0.5.13", "0.5.19")),
    VersionCase(
        "0.5.6.post2",
        "newer_flag_on_older_release",
        f"{TARGET} --cuda-graph-max-bs-decode 8",
        "argparse_unrecognized",
        r": error: ",
        ("--cuda-graph-max-bs-decode", "--cuda-graph-max-bs"),
        f"{TARGET} --cuda-graph-max-bs 8",
        "A 0.5.19+ flag on 0.5.6.post2; the usage text argparse prints names the release. "
        "The correction is not verified: 0.5.6.post2's validation imports sgl_kernel (GPU).",
        "new in sglang 0.5.19",
        verifiable=False,
    ),
    VersionCase(
        NEWEST,
        "removed_flag_renamed",
        f"{TARGET} --stream-output",
        "argparse_unrecognized",
        r": error: ",
        ("--stream-output",),
        f"{TARGET} --incremental-streaming-output",
        "--stream-output existed until 0.5.19; 0.5.23 calls the same setting "
        "--incremental-streaming-output.",
        "removed between sglang 0.5.19 and 0.5.23",
    ),
)


def release_path(release: str) -> str | None:
    """The PYTHONPATH entry for a release (None: the venv's own sglang, the newest)."""
    if release == NEWEST:
        return None
    folder = RELEASES / release
    if not folder.is_dir():
        raise SystemExit(f"{folder} is missing: run scripts/install-sglang.sh first")
    return str(folder)


def run(case: VersionCase) -> real.RunResult:
    """The launch with the release first on the path (the generator's clean environment)."""
    path = release_path(case.release)
    if path:
        os.environ["PYTHONPATH"] = path
    else:
        os.environ.pop("PYTHONPATH", None)
    launch = real.Case(case.id, case.args, case.expect_class, "", case.flags, case.note)
    return real.run_case(launch)


def decisive_line(lines: Sequence[str], pattern: str) -> int | None:
    """1-based number of the last line matching `pattern` (after SGLang's time prefix)."""
    for index in range(len(lines) - 1, -1, -1):
        body = re.sub(r"^\[\d{4}-\d\d-\d\d [^\]]*\] ", "", lines[index].rstrip())
        if re.search(pattern, body):
            return index + 1
    return None


def sidecar(case: VersionCase, result: real.RunResult, line: int | None, verified: bool) -> str:
    fixture = {
        "origin": "real",
        "sglang_version": case.release,
        "command": f"{real.LAUNCH} {case.args}",
        "exit_code": result.exit_code,
        "generated_by": "scripts/generate_version_fixtures.py",
        "note": case.note,
    }
    expect: dict[str, object] = {"class": case.expect_class}
    if line is not None:
        expect["line"] = line
    expect["flags"] = list(case.flags)
    expect["corrected_command"] = f"{real.LAUNCH} {case.corrected}"
    expect["catalog_version"] = case.release
    if case.advice:
        expect["advice_contains"] = [case.advice]
    expect["verified"] = verified
    out = ["[fixture]", *(f"{k} = {real.toml_value(v)}" for k, v in fixture.items())]
    out += ["", "[expect]", *(f"{k} = {real.toml_value(v)}" for k, v in expect.items())]
    return "\n".join(out) + "\n"


def generate(case: VersionCase) -> list[str]:
    result = run(case)
    OUT.mkdir(parents=True, exist_ok=True)
    real.write_if_changed(OUT / f"{case.id}.log", "\n".join(result.lines))
    line = decisive_line(result.lines, case.decisive)
    verdict = verify_command(
        f"{real.LAUNCH} {case.corrected}", sys.executable, 300, release_path(case.release)
    )
    verified = verdict.status == "pass" and verdict.sglang_version == case.release
    real.write_if_changed(OUT / f"{case.id}.toml", sidecar(case, result, line, verified))
    problems = (
        []
        if line and verified == case.verifiable
        else [f"{case.id}: line {line}, {verdict.describe()}"]
    )
    print(f"{case.id}: exit {result.exit_code}, line {line}, {verdict.describe()}", flush=True)
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="ID", help="run only these cases")
    args = parser.parse_args(argv)
    cases = [c for c in CASES if not args.only or c.id in args.only]
    real.write_models()
    problems = [p for case in cases for p in generate(case)]
    for problem in problems:
        print(f"PROBLEM {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

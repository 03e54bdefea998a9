"""Full triage vs `LC_ALL=C grep -c -E` on the same file, in one run; peak RSS by size.

    python benchmarks/triage_bench.py [--sizes 10M,100M,1G] [--workdir DIR]

For each size: generates a log (benchmarks/generate_log.py), times
`loganalyze --format json LOG` and `grep -c -E` with a pattern of the rules'
trigger literals, prints the ratio and loganalyze's peak RSS; then the same for the
gzip of the largest log against `zcat | grep`. Goals (issue 6): ratio <= 2,
peak RSS < 200 MB and flat; .gz <= 1.5x zcat|grep.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analyzer.rulebook.vocabulary import all_triggers, load_rules  # noqa: E402
from benchmarks.generate_log import parse_size, write_log  # noqa: E402

LOGANALYZE = [sys.executable, "-m", "analyzer", "--format", "json"]


def grep_pattern() -> str:
    literals = all_triggers(load_rules()) + ["Traceback (most recent call last):"]
    return "|".join(re.escape(t) for t in literals)


def timed(command: list[str] | str, shell: bool = False) -> tuple[float, int]:
    """Wall seconds and the child's peak RSS in MB (ru_maxrss of this child alone)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    subprocess.run(command, shell=shell, stdout=subprocess.DEVNULL, check=False)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return elapsed, max(after, before) // 1024


def rss_of(command: list[str]) -> int:
    """Peak RSS (MB) of one command, measured in a fresh process so sizes don't mask."""
    probe = (
        "import resource,subprocess,sys;subprocess.run(sys.argv[1:],stdout=subprocess.DEVNULL);"
        "print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss//1024)"
    )
    out = subprocess.run([sys.executable, "-c", probe, *command], capture_output=True, text=True)
    return int(out.stdout.strip() or 0)


def bench(sizes: list[str], workdir: Path) -> None:
    pattern = grep_pattern()
    env_c = "LC_ALL=C"
    print(f"machine: {os.cpu_count()} cores; python {sys.version.split()[0]}")
    print(f"{'size':>6} {'grep s':>8} {'triage s':>9} {'ratio':>6} {'peak RSS MB':>12}")
    largest = None
    for size in sizes:
        log = workdir / f"bench-{size}.log"
        if not log.exists():
            write_log(str(log), parse_size(size))
        grep_s, _ = timed(f"{env_c} grep -c -E {shlex_quote(pattern)} {log}", shell=True)
        triage_s, _ = timed([*LOGANALYZE, str(log)])
        rss = rss_of([*LOGANALYZE, str(log)])
        print(f"{size:>6} {grep_s:>8.2f} {triage_s:>9.2f} {triage_s / grep_s:>6.2f} {rss:>12}")
        largest = log
    if largest is not None:
        gz = largest.with_suffix(".log.gz")
        if not gz.exists():
            subprocess.run(f"gzip -1 -c {largest} > {gz}", shell=True, check=True)
        zgrep_s, _ = timed(f"zcat {gz} | {env_c} grep -c -E {shlex_quote(pattern)}", shell=True)
        triage_s, _ = timed([*LOGANALYZE, str(gz)])
        print(
            f"gzip: zcat|grep {zgrep_s:.2f} s, triage {triage_s:.2f} s, ratio {triage_s / zgrep_s:.2f}"
        )


def shlex_quote(text: str) -> str:
    import shlex

    return shlex.quote(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10M,100M,1G")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args()
    workdir = Path(args.workdir or tempfile.mkdtemp(prefix="loganalyze-bench-"))
    workdir.mkdir(parents=True, exist_ok=True)
    bench(args.sizes.split(","), workdir)


if __name__ == "__main__":
    main()

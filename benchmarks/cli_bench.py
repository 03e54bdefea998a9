"""The whole CLI on a small crash log vs the start of Python with its libraries.

    python benchmarks/cli_bench.py [--log LOG] [--runs 15]

Times `python -c "import typer, rich, regex"` (the floor any typer + rich CLI pays) and
`loganalyze --format json LOG` (default: the largest real crash log under fixtures/real,
about 40 KB), alternating the two so background load hits both alike, and prints the
median of each and their ratio, in wall time and in CPU time (steadier on a loaded machine).
Goal (issue 17): ratio <= 1.5.

The parsed rules and catalogs are kept between runs (analyzer/core/parse_cache.py, in
$LOGANALYZE_CACHE_DIR, else the user cache dir): the warm-up run fills that cache, as any
first run does. `--no-cache` measures every run parsing them again (LOGANALYZE_CACHE_DIR="").
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIBRARIES = [sys.executable, "-c", "import typer, rich, regex"]
# the libraries have their bytecode from pip; with PYTHONDONTWRITEBYTECODE set, an editable
# checkout would compile every module from source on every run, and measure that instead
CHILD_ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def default_log() -> Path:
    return max((ROOT / "fixtures" / "real").glob("*.log"), key=lambda p: p.stat().st_size)


def seconds(command: list[str]) -> tuple[float, float]:
    """Wall seconds and CPU seconds (user + system) of one run of `command`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False, env=CHILD_ENV
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--log", type=Path, default=None)
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--no-cache", action="store_true", help="parse rules and catalogs each run")
    args = parser.parse_args()
    if args.no_cache:
        CHILD_ENV["LOGANALYZE_CACHE_DIR"] = ""
    log = args.log or default_log()
    analyze = [sys.executable, "-m", "analyzer", "--format", "json", str(log)]
    seconds(LIBRARIES), seconds(analyze)  # warm the page cache and the bytecode
    base, full = [], []
    for _ in range(args.runs):
        base.append(seconds(LIBRARIES))
        full.append(seconds(analyze))
    shown = log.relative_to(ROOT) if log.is_relative_to(ROOT) else log
    cache = "off" if args.no_cache else "warm"
    print(
        f"log: {shown} ({log.stat().st_size / 1024:.0f} KB), {args.runs} runs each, medians, "
        f"parse cache {cache}"
    )
    for what, index in (("wall", 0), ("cpu", 1)):
        lib = statistics.median(t[index] for t in base)
        cli = statistics.median(t[index] for t in full)
        print(
            f"{what}: import typer, rich, regex {lib:.3f} s; loganalyze {cli:.3f} s; "
            f"ratio {cli / lib:.2f} (goal <= 1.5)"
        )


if __name__ == "__main__":
    main()

"""Benchmark `loganalyze metrics` on a big log, against SGLang's own log parser.

    .venv/bin/python benchmarks/metrics_bench.py                 # generate 1 GB, time both
    .venv/bin/python benchmarks/metrics_bench.py --log big.log   # time on an existing log
    .venv/bin/python benchmarks/metrics_bench.py --size-mb 100 --skip-sglang

The generated log follows the `Decode batch` shape of SGLang 0.5.6
(`srt/managers/scheduler_metrics_mixin.py`: comma after `Decode batch`, trailing
comma after `#queue-req: N`), the one shape that `debug_utils/log_parser.py` still
matches, so both tools parse the same rows; the row counts are checked to agree.

SGLang's parser is loaded from its file (not via `import sglang`, which would drag
torch into its timing) and run with the SGLang venv's python, which needs polars.
Times are wall-clock of the whole process (and its CPU seconds); peak RSS is the
largest ru_maxrss of the process or any of its workers, and "tree MB" the largest sum
of the proportional set size (PSS: shared pages split between the processes sharing
them) of the process and its workers, sampled every 20 ms; loganalyze scans big files
with one worker process per CPU, forked, so they share the parent's pages.
Targets (reported, never enforced): at most 1/5 of SGLang's time, peak RSS < 250 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# scripts/install-sglang.sh puts SGLang 0.5.23 (with polars, which its parser needs) here
SGLANG_PYTHON = ROOT / ".sglang" / "venv" / "bin" / "python"
TARGET_RATIO = 5.0
TARGET_RSS_MB = 250.0

SGLANG_RUNNER = r"""
import importlib.util, sys
spec = importlib.util.spec_from_file_location("log_parser", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
with open(sys.argv[2], encoding="utf-8", errors="replace") as handle:
    df = module.parse(handle.read())
print(len(df))
"""


@dataclass
class Timing:
    tool: str
    seconds: float
    cpu_seconds: float
    peak_rss_mb: float
    tree_rss_mb: float
    rows: int | None
    exit_code: int


def generate(path: Path, size_bytes: int, seed: int = 7) -> int:
    """Write a speculative-decoding server log of about `size_bytes`; return its decode lines.

    Mostly decode lines (one per decode_log_interval), a prefill line and two access-log
    lines now and then, the way a busy server's log looks.
    """
    rng = random.Random(seed)
    decode_lines = 0
    written = 0
    second = 0
    with open(path, "w", encoding="utf-8") as out:
        out.write(_startup_block())
        while written < size_bytes:
            chunk = []
            for _ in range(1000):
                second += 1
                stamp = _stamp(40 + second // 4)
                if rng.random() < 0.08:
                    chunk.append(
                        f"[{stamp} TP0] Prefill batch, #new-seq: {rng.randint(1, 8)}, "
                        f"#new-token: {rng.randint(16, 8192)}, #cached-token: {rng.randint(0, 4096)}, "
                        f"token usage: {rng.random() * 0.9:.2f}, #running-req: {rng.randint(1, 64)}, "
                        f"#queue-req: {rng.randint(0, 20)}, \n"
                    )
                    chunk.append(
                        f"[{stamp}] INFO:     127.0.0.1:{rng.randint(30000, 60000)} - "
                        f'"POST /v1/chat/completions HTTP/1.1" 200 OK\n'
                    )
                running = rng.randint(1, 64)
                accept = 1.0 + rng.random() * 2.5
                chunk.append(
                    f"[{stamp} TP0] Decode batch, #running-req: {running}, "
                    f"#token: {running * rng.randint(200, 2000)}, "
                    f"token usage: {rng.random() * 0.9:.2f}, accept len: {accept:.2f}, "
                    f"accept rate: {(accept - 1) / 3:.2f}, cuda graph: {rng.random() < 0.97}, "
                    f"gen throughput (token/s): {running * accept * rng.uniform(20, 40):.2f}, "
                    f"#queue-req: {rng.randint(0, 20)}, \n"
                )
                decode_lines += 1
            text = "".join(chunk)
            out.write(text)
            written += len(text)
    return decode_lines


def _stamp(seconds: int) -> str:
    day, rest = divmod(seconds, 86400)
    hour, rest = divmod(rest, 3600)
    minute, sec = divmod(rest, 60)
    return f"2026-01-{1 + day % 28:02d} {hour:02d}:{minute:02d}:{sec:02d}"


def _startup_block() -> str:
    return (
        "[2026-01-01 00:00:00] server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', "
        "tp_size=1, dp_size=1, speculative_algorithm='EAGLE3', "
        "speculative_draft_model_path='jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B', "
        "speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4, "
        "disable_cuda_graph=False, max_running_requests=64)\n"
        "[2026-01-01 00:00:01 TP0] Load weight begin. avail mem=78.50 GB\n"
        "[2026-01-01 00:00:09 TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, "
        "avail mem=63.40 GB, mem usage=15.10 GB.\n"
        "[2026-01-01 00:00:10 TP0] KV Cache is allocated. #tokens: 400000, K size: 24.41 GB, "
        "V size: 24.41 GB\n"
        "[2026-01-01 00:00:10 TP0] Capture cuda graph begin. This can take up to several minutes. "
        "avail mem=14.20 GB\n"
        "[2026-01-01 00:00:31 TP0] Capture cuda graph end. Time elapsed: 21.04 s. mem usage=1.12 GB. "
        "avail mem=13.08 GB.\n"
        "[2026-01-01 00:00:40] The server is fired up and ready to roll!\n"
    )


def run_measured(
    tool: str, argv: list[str], env: dict[str, str] | None = None
) -> tuple[Timing, str]:
    """Run a child; wall time, CPU time, peak RSS (own and of its process tree), stdout."""
    with tempfile.TemporaryFile() as out:
        start = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.PIPE, env=env)
        sampler = _TreeSampler(proc.pid)
        sampler.start()
        _, status, usage = os.wait4(proc.pid, 0)
        elapsed = time.perf_counter() - start
        sampler.stop()
        proc.returncode = os.waitstatus_to_exitcode(status)
        stderr = proc.stderr.read().decode("utf-8", "replace") if proc.stderr else ""
        out.seek(0)
        stdout = out.read().decode("utf-8", "replace")
    if proc.returncode != 0:
        print(f"{tool} exited {proc.returncode}: {stderr.strip()[-2000:]}", file=sys.stderr)
    timing = Timing(
        tool,
        round(elapsed, 2),
        round(usage.ru_utime + usage.ru_stime, 2),
        round(usage.ru_maxrss / 1024, 1),
        round(sampler.peak_kb / 1024, 1),
        None,
        proc.returncode,
    )
    return timing, stdout


class _TreeSampler(threading.Thread):
    """Largest sum of PSS over a process and its descendants, from /proc."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.peak_kb, self.done = pid, 0, threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.02):
            self.peak_kb = max(self.peak_kb, sum(_pss_kb(p) for p in _tree(self.pid)))

    def stop(self) -> None:
        self.done.set()
        self.join()


def _tree(pid: int) -> list[int]:
    found, todo = [], [pid]
    while todo:
        current = todo.pop()
        found.append(current)
        try:
            with open(f"/proc/{current}/task/{current}/children") as handle:
                todo += [int(c) for c in handle.read().split()]
        except OSError:
            pass
    return found


def _pss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/smaps_rollup") as handle:
            for line in handle:
                if line.startswith("Pss:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def time_loganalyze(log: Path, workers: int | None = None) -> Timing:
    argv = [sys.executable, "-m", "analyzer", "metrics", str(log), "--format", "json"]
    label = "loganalyze metrics"
    if workers is not None:
        argv += ["--workers", str(workers)]
        label += f" --workers {workers}"
    timing, stdout = run_measured(label, argv)
    if timing.exit_code == 0:
        timing.rows = json.loads(stdout)["runs"][0]["decode"]["lines"]
    return timing


def time_loganalyze_series(log: Path, series: Path) -> Timing:
    argv = [sys.executable, "-m", "analyzer", "metrics", str(log), "-o", str(series)]
    timing, _ = run_measured("loganalyze metrics -o series.csv", argv)
    return timing


def time_sglang(log: Path) -> Timing | None:
    parser = _sglang_log_parser()
    if parser is None:
        print(f"skipped SGLang's parser: no {SGLANG_PYTHON} with debug_utils/log_parser.py")
        return None
    argv = [str(SGLANG_PYTHON), "-c", SGLANG_RUNNER, str(parser), str(log)]
    timing, stdout = run_measured("sglang log_parser.parse", argv)
    if timing.exit_code == 0:
        timing.rows = int(stdout.strip().splitlines()[-1])
    return timing


def _sglang_log_parser() -> Path | None:
    if not SGLANG_PYTHON.exists():
        return None
    found = subprocess.run(
        [str(SGLANG_PYTHON), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        capture_output=True,
        text=True,
    )
    path = Path(found.stdout.strip()) / "sglang/srt/debug_utils/log_parser.py"
    return path if path.exists() else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--log", type=Path, help="time this log instead of generating one")
    parser.add_argument("--size-mb", type=int, default=1024, help="size of the generated log")
    parser.add_argument("--skip-sglang", action="store_true")
    parser.add_argument("--keep", action="store_true", help="keep the generated log")
    parser.add_argument("--series", action="store_true", help="also time -o series.csv")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="metrics-bench-"))
    log = args.log
    if log is None:
        log = folder / "big.log"
        start = time.perf_counter()
        lines = generate(log, args.size_mb * 1024 * 1024)
        took = time.perf_counter() - start
        print(
            f"generated {log} ({log.stat().st_size / 2**20:.0f} MiB, {lines} decode lines) in {took:.1f} s"
        )
    results = [time_loganalyze(log), time_loganalyze(log, workers=1)]
    if args.series:
        results.append(time_loganalyze_series(log, folder / "series.csv"))
    if not args.skip_sglang:
        sglang = time_sglang(log)
        if sglang is not None:
            results.append(sglang)
    _report(results, log)
    if not args.keep:
        shutil.rmtree(folder, ignore_errors=True)


def _report(results: list[Timing], log: Path) -> None:
    size = log.stat().st_size / 2**20
    print(f"\nlog: {log} ({size:.0f} MiB)")
    print(f"{'tool':<36} {'seconds':>8} {'cpu s':>7} {'peak MB':>8} {'tree MB':>8} {'rows':>9}")
    for r in results:
        print(
            f"{r.tool:<36} {r.seconds:>8.2f} {r.cpu_seconds:>7.2f} {r.peak_rss_mb:>8.1f} "
            f"{r.tree_rss_mb:>8.1f} {r.rows!s:>9}"
        )
    ours = results[0]
    sglang = next((r for r in results if r.tool.startswith("sglang")), None)
    verdicts = [
        f"peak RSS {ours.peak_rss_mb:.0f} MB per process, {ours.tree_rss_mb:.0f} MB PSS summed "
        f"over it and its workers (target < {TARGET_RSS_MB:.0f} MB): "
        f"{'met' if max(ours.peak_rss_mb, ours.tree_rss_mb) < TARGET_RSS_MB else 'MISSED'}"
    ]
    if sglang is not None and sglang.exit_code == 0:
        for mine in (r for r in results if r.tool.startswith("loganalyze metrics") and r.rows):
            ratio = sglang.seconds / mine.seconds if mine.seconds else float("inf")
            verdicts.append(
                f"{mine.tool}: {ratio:.1f}x faster than SGLang's parser "
                f"(target >= {TARGET_RATIO:.0f}x): {'met' if ratio >= TARGET_RATIO else 'MISSED'}"
            )
        if sglang.rows != ours.rows:
            verdicts.append(f"row counts differ: ours {ours.rows}, SGLang's {sglang.rows}")
    print("\n".join(verdicts))
    print(json.dumps([asdict(r) for r in results]))


if __name__ == "__main__":
    main()

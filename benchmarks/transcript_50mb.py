"""Read and analyse a 50 MB session transcript; time and peak RSS per format.

    python benchmarks/transcript_50mb.py [--size 50M] [--workdir DIR]

Builds, in a temporary folder, a Claude Code JSONL, an `opencode export` JSON and a
terminal paste of the given size from the fixtures' own records: a long session of diagnostics (`cat` of big
files, `ls`, nvidia-smi, health polls) with a launch and a failing look at its log every
few hundred calls. Each is analysed in a child process that times reading + analysis + the
JSON report and prints its own peak RSS (ru_maxrss of RUSAGE_SELF). Goal (issue 4): a few seconds,
memory that does not grow with the transcript (compare --size 10M and 50M).
Not a test: it prints numbers.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "transcripts"
UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int:
    return (
        int(float(text[:-1]) * UNITS[text[-1].upper()]) if text[-1].upper() in UNITS else int(text)
    )


def _filler(index: int) -> str:
    """About 24 KB of output a session prints: a config file dump, a directory listing."""
    rows = [
        f'    "layer_{index}_{k}": {{"hidden_size": 7168, "rope_theta": 50000.0}},'
        for k in range(300)
    ]
    return "{\n" + "\n".join(rows) + "\n}"


def claude_transcript(path: Path, size: int) -> int:
    """Repeat the fixture's records, with filler calls between them, up to `size` bytes."""
    session = (
        FIXTURES.joinpath("claude_unrecognized_then_assertion.jsonl")
        .read_text("utf-8")
        .splitlines()
    )
    written = calls = 0
    with path.open("w", encoding="utf-8") as out:
        while written < size:
            for line in session:
                out.write(line + "\n")
                written += len(line) + 1
            for k in range(200):
                calls += 1
                tool_id = f"toolu_fill{calls:07d}"
                use = {
                    "type": "assistant",
                    "uuid": f"f{calls}a",
                    "timestamp": "2026-02-24T10:00:00Z",
                    "message": {
                        "role": "assistant",
                        "content": [
                            {
                                "type": "tool_use",
                                "id": tool_id,
                                "name": "Bash",
                                "input": {"command": f"cat /data/configs/layer_{k}.json"},
                            }
                        ],
                    },
                }
                result = {
                    "type": "user",
                    "uuid": f"f{calls}u",
                    "timestamp": "2026-02-24T10:00:01Z",
                    "message": {
                        "role": "user",
                        "content": [
                            {
                                "type": "tool_result",
                                "tool_use_id": tool_id,
                                "content": _filler(k),
                                "is_error": False,
                            }
                        ],
                    },
                }
                for record in (use, result):
                    text = json.dumps(record)
                    out.write(text + "\n")
                    written += len(text) + 1
    return written


def opencode_export(path: Path, size: int) -> int:
    """The export fixture's messages repeated, with filler bash parts, as one JSON object."""
    data = json.loads(
        FIXTURES.joinpath("opencode_export_log_folder_missing.json").read_text("utf-8")
    )
    written = 0
    with path.open("w", encoding="utf-8") as out:
        out.write('{\n  "info": ' + json.dumps(data["info"]) + ',\n  "messages": [\n')
        first = True
        batch = 0
        while written < size:
            batch += 1
            filler = {
                "info": {"id": f"msg_fill{batch:06d}", "role": "assistant", "time": {"created": 0}},
                "parts": [
                    {
                        "id": f"prt_fill{batch:06d}_{k}",
                        "type": "tool",
                        "tool": "bash",
                        "state": {
                            "status": "completed",
                            "input": {"command": f"cat /data/c{k}.json"},
                            "output": _filler(k),
                            "metadata": {"exit": 0},
                            "time": {"start": 0},
                        },
                    }
                    for k in range(40)
                ],
            }
            for message in [*data["messages"], filler]:
                text = ("" if first else ",\n") + json.dumps(message, indent=2)
                first = False
                out.write(text)
                written += len(text)
        out.write('\n  ],\n  "todos": []\n}\n')
    return written


def terminal_text(path: Path, size: int) -> int:
    """The terminal fixture repeated, each time after `cat`s of big files."""
    session = FIXTURES.joinpath("terminal_nohup_wrong_interpreter.txt").read_text("utf-8")
    written = 0
    with path.open("w", encoding="utf-8") as out:
        while written < size:
            for k in range(40):
                text = f"dev@cpu-box:~$ cat /data/configs/layer_{k}.json\n{_filler(k)}\n"
                out.write(text)
                written += len(text)
            out.write(session)
            written += len(session)
    return written


# The child times reading + analysis itself and reports its own peak RSS (RUSAGE_SELF), so
# each format's number is its own, not the largest child's so far.
CHILD = """
import resource, sys, time
from analyzer.formats.json_report import render_json
from analyzer.pipeline import analyze
started = time.perf_counter()
text = render_json(analyze([sys.argv[1]]))
seconds = time.perf_counter() - started
sys.stdout.write(text)
sys.stderr.write(f"{seconds} {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}")
"""


def timed(path: Path) -> tuple[float, float, dict]:
    """Seconds of reading + analysis, that process's peak RSS in MB, and the report."""
    result = subprocess.run(
        [sys.executable, "-c", CHILD, str(path)], capture_output=True, cwd=ROOT, check=False
    )
    if result.returncode != 0:
        raise SystemExit(result.stderr.decode())
    seconds, peak_kb = result.stderr.decode().split()[-2:]
    return float(seconds), int(peak_kb) / 1024, json.loads(result.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="50M")
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    size = parse_size(args.size)
    with tempfile.TemporaryDirectory(dir=args.workdir) as folder:
        for name, build in (
            ("claude_jsonl", claude_transcript),
            ("opencode_export", opencode_export),
            ("terminal_text", terminal_text),
        ):
            path = Path(folder) / f"{name}.json"
            written = build(path, size)
            seconds, peak_mb, report = timed(path)
            attempts = len(report["attempts"])
            print(
                f"{name:16} {written / (1 << 20):6.1f} MB  {seconds:6.2f} s  "
                f"peak RSS {peak_mb:6.1f} MB  {len(report['incidents'])} incidents, {attempts} attempts"
            )


if __name__ == "__main__":
    main()

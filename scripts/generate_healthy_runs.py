"""Generate healthy real runs: SGLang 0.5.23 serving on CPU, for the negatives.

Run from the repository root with the Python of an environment that has SGLang installed:

    /work/main/.sglang/venv/bin/python scripts/generate_healthy_runs.py [--only NAME]

Each case launches `python -m sglang.launch_server --model-path fixtures/models/gpt2-tiny
--device cpu --load-format dummy` (a config-and-tokenizer-only model: dummy weights), waits for
the ready line, sends its requests to /generate, stops the server with SIGINT as a user's
Ctrl-C does, and writes the captured log (both streams, unbuffered) to
fixtures/negative/NAME.log with a sidecar expecting no failure. A CPU start prints alarming
but harmless lines (`Cannot detect CUDA architecture`, `Fail to set RLIMIT_NOFILE`, skipped
model imports, a subprocess `crashed with exit code -9` while the parent tears its tree down
on shutdown); the requests' own text can hold failure words (`--log-requests`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "fixtures" / "negative"
MODEL = "fixtures/models/gpt2-tiny"
READY = "The server is fired up and ready to roll"
START_TIMEOUT_S = 900
PORT = 31234


@dataclass(frozen=True)
class Case:
    name: str
    args: str
    prompts: tuple[str, ...]
    note: str


CASES = (
    Case(
        "neg_real_healthy_cpu_serve_and_stop",
        "",
        ("Hello",),
        "Serves one request and stops on SIGINT; the shutdown kills the subprocess tree "
        "(`Subprocess detokenizer ... crashed with exit code -9`): shutdown noise.",
    ),
    Case(
        "neg_real_healthy_cpu_alarming_requests",
        "--log-requests",
        (
            "Why did my job print CUDA error: invalid device ordinal and then Killed?",
            "What does terminate called after throwing an instance of c10::Error mean?",
        ),
        "Requests whose text holds failure words, logged by --log-requests "
        "(srt/utils/request_logger.py: `Receive: obj=...`): the user's words, not failures.",
    ),
)


def clean_env() -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if "proxy" not in k.lower() and not k.startswith("SGLANG_")
    }
    env["PYTHONUNBUFFERED"] = "1"
    return env


def generate(prompt: str) -> None:
    body = json.dumps({"text": prompt, "sampling_params": {"max_new_tokens": 8}}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{PORT}/generate", body, {"Content-Type": "application/json"}
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=300) as answer:
        answer.read()


def run(case: Case) -> Path:
    log = OUT / f"{case.name}.log"
    argv = [sys.executable, "-m", "sglang.launch_server", "--model-path", MODEL,
            "--device", "cpu", "--load-format", "dummy", "--port", str(PORT),
            *shlex.split(case.args)]  # fmt: skip
    with log.open("wb") as sink:
        proc = subprocess.Popen(argv, cwd=ROOT, env=clean_env(), stdout=sink,
                                stderr=subprocess.STDOUT, start_new_session=True)  # fmt: skip
        try:
            deadline = time.monotonic() + START_TIMEOUT_S
            while READY not in log.read_text("utf-8", errors="replace"):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{case.name}: the server did not become ready")
                time.sleep(2)
            for prompt in case.prompts:
                generate(prompt)
            time.sleep(2)
            proc.send_signal(signal.SIGINT)
            proc.wait(timeout=60)
        finally:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
    command = shlex.join(["python", "-m", "sglang.launch_server", *argv[3:]])
    log.with_suffix(".toml").write_text(
        "[fixture]\n"
        'origin = "real"\n'
        'sglang_version = "0.5.23"\n'
        f"command = {json.dumps(command)}\n"
        "command_in_log = false\n"
        f"note = {json.dumps('A healthy CPU run (scripts/generate_healthy_runs.py). ' + case.note)}\n"
        "\n[expect]\n"
        'class = "none"\n',
        "utf-8",
    )
    return log


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only")
    args = parser.parse_args()
    for case in CASES:
        if args.only in (None, case.name):
            print(run(case))


if __name__ == "__main__":
    main()

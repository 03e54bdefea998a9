"""Write a realistic SGLang server log of about SIZE bytes (for the benchmarks).

Startup (server_args, weight loading, KV cache, CUDA graph capture, ready), then
prefill/decode batch lines with speculative metrics from 8 TP ranks and HTTP access
lines, and a crash at the end: the shape of a server that ran for days and died.

    python benchmarks/generate_log.py OUT.log 1G [--gzip]
"""

from __future__ import annotations

import argparse
import gzip
import random

STARTUP = """[2026-02-23 09:00:00] server_args=ServerArgs(model_path='/models/Kimi-K2.5', tp_size=8, speculative_algorithm='EAGLE3', speculative_draft_model_path='/data/eagle3/ckpt', speculative_num_steps=3, speculative_eagle_topk=1, speculative_num_draft_tokens=4, mem_fraction_static=0.85, port=30000)
[2026-02-23 09:00:05 TP0] Init torch distributed begin.
[2026-02-23 09:00:09 TP0] Load weight begin. avail mem=94.12 GB
[2026-02-23 09:03:41 TP0] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=21.40 GB, mem usage=72.72 GB.
[2026-02-23 09:03:42 TP0] KV Cache is allocated. #tokens: 412345, K size: 6.10 GB, V size: 6.10 GB
[2026-02-23 09:03:43 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=8.20 GB
[2026-02-23 09:05:01 TP0] Capture cuda graph end. Time elapsed: 78.12 s. mem usage=1.90 GB. avail mem=6.30 GB.
[2026-02-23 09:05:03] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)
[2026-02-23 09:05:09] The server is fired up and ready to roll!
"""
CRASH = """[2026-02-26 17:12:09 TP3] Scheduler hit an exception: Traceback (most recent call last):
  File "/usr/local/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 2801, in run_scheduler_process
    scheduler.event_loop_normal()
  File "/usr/local/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", line 901, in event_loop_normal
    result = self.run_batch(batch)
torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 94.97 GiB of which 1.06 GiB is free.

[2026-02-26 17:12:10] Received sigquit from a child process. It usually means the child failed.
"""


def body_lines(rng: random.Random):
    second = 0
    while True:
        second += 1
        stamp = f"2026-02-2{3 + second // 86400 % 4} {second // 3600 % 24:02d}:{second // 60 % 60:02d}:{second % 60:02d}"
        for rank in range(8):
            roll = rng.random()
            if roll < 0.8:
                yield (
                    f"[{stamp} TP{rank}] Decode batch, #running-req: {rng.randint(1, 48)}, "
                    f"#token: {rng.randint(1000, 400000)}, token usage: {rng.random():.2f}, "
                    f"accept len: {1 + rng.random() * 2:.2f}, accept rate: {rng.random():.2f}, "
                    f"cuda graph: True, gen throughput (token/s): {rng.uniform(60, 95):.2f}, "
                    f"#queue-req: {rng.randint(0, 5)}\n"
                )
            elif roll < 0.9:
                yield (
                    f"[{stamp} TP{rank}] Prefill batch, #new-seq: 1, #new-token: {rng.randint(1, 8192)}, "
                    f"#cached-token: {rng.randint(0, 4096)}, token usage: {rng.random():.2f}, "
                    f"#running-req: {rng.randint(0, 48)}, #queue-req: {rng.randint(0, 5)}\n"
                )
        if rng.random() < 0.5:
            port = rng.randint(40000, 65000)
            yield f'[{stamp}] INFO:     127.0.0.1:{port} - "POST /generate HTTP/1.1" 200 OK\n'


def parse_size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].isalpha() else int(text)


def write_log(path: str, size: int, compress: bool = False, seed: int = 7) -> None:
    rng = random.Random(seed)
    opener = gzip.open if compress else open
    with opener(path, "wt", encoding="utf-8") as out:
        out.write(STARTUP)
        written = len(STARTUP)
        batch: list[str] = []
        for line in body_lines(rng):
            batch.append(line)
            written += len(line)
            if len(batch) >= 10000:
                out.write("".join(batch))
                batch.clear()
            if written >= size - len(CRASH):
                break
        out.write("".join(batch))
        out.write(CRASH)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out")
    parser.add_argument("size", help="bytes, or with K/M/G")
    parser.add_argument("--gzip", action="store_true")
    args = parser.parse_args()
    write_log(args.out, parse_size(args.size), args.gzip)


if __name__ == "__main__":
    main()

"""A launch that came up and served is a death only with evidence of its own death: the
next launch's failure, or the idle GPUs the user checks before relaunching, never reach
back to it."""

from __future__ import annotations

import json

from analyzer.formats.json_report import render_json
from analyzer.pipeline import Options, analyze

SERVED = """\
dev@box:~$ nohup python -m sglang.launch_server --model-path /models/llama --port 30000 > /tmp/a.log 2>&1 &
[1] 1111
dev@box:~$ sleep 60; tail -n 2 /tmp/a.log
[2026-12-02 17:04:49] The server is fired up and ready to roll!
[2026-12-02 17:04:50] INFO:     127.0.0.1:4242 - "POST /generate HTTP/1.1" 200 OK
dev@box:~$ nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv
index, memory.used [MiB], memory.total [MiB]
0, 3 MiB, 81559 MiB
"""
RELAUNCH = """\
dev@box:~$ nohup python -m sglang.launch_server --model-path /models/llama --tp-size 3 > /tmp/b.log 2>&1 &
[2] 2222
dev@box:~$ sleep 20; tail -n 4 /tmp/b.log
Traceback (most recent call last):
  File "/usr/lib/python3/site-packages/sglang/srt/server_args.py", line 277, in __post_init__
    self.check_server_args()
AssertionError: The number of attention heads 32 must be divisible by tp_size 3
dev@box:~$ pgrep -af sglang
dev@box:~$
"""


def _report(tmp_path, text: str) -> dict:
    path = tmp_path / "session.txt"
    path.write_text(text)
    return json.loads(render_json(analyze([str(path)], Options())))


def test_a_served_launch_stays_served_when_the_next_one_fails(tmp_path):
    report = _report(tmp_path, SERVED + RELAUNCH)
    assert [a["outcome"] for a in report["attempts"]] == ["ready", "failed"]
    assert {i["attempt"] for i in report["incidents"]} == {2}


def test_a_served_launch_found_gone_with_nothing_after_it_still_failed(tmp_path):
    report = _report(tmp_path, SERVED + "dev@box:~$ pgrep -af sglang\ndev@box:~$\n")
    assert [a["outcome"] for a in report["attempts"]] == ["failed"]

"""Write the transcript fixtures of today's tool shapes (fixtures/transcripts/).

Each is the story of an older-shape fixture (or of a real/source log) told in the shape a
current tool version writes; the sidecars say which source file each shape follows. The
output is deterministic: run `python scripts/generate_transcript_fixtures.py` and commit.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import zstandard

ROOT = Path(__file__).resolve().parent.parent
HERE = ROOT / "fixtures" / "transcripts"
REAL = ROOT / "fixtures" / "real"
SOURCE = ROOT / "fixtures" / "source"


def _lines(path: Path) -> list[str]:
    return path.read_text("utf-8").rstrip("\n").split("\n")


def _write_jsonl(path: Path, records: list[dict]) -> bytes:
    data = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return data


# --------------------------------------------------------------------------- codex


def _old_codex() -> dict[str, str]:
    """The outputs of the older-shape Codex fixture, by call id."""
    found = {}
    for line in (HERE / "codex_gpus_busy_then_oom.jsonl").read_text("utf-8").splitlines():
        record = json.loads(line)
        payload = record["payload"]
        if payload.get("type") == "function_call_output":
            output = payload["output"]
            if output.startswith("{"):
                output = json.loads(output)["output"]
            else:
                output = output.split("Output:\n", 1)[1]
            found[payload["call_id"]] = output
    return found


class Rollout:
    def __init__(self, version: str, start: str = "2026-03-17T13:23:40") -> None:
        self.records: list[dict] = []
        self.clock = 0
        self.start = start
        self.meta = {
            "id": "019c8e41-2d7a-7c33-9b1e-4f6a0d2c8e15",
            "cwd": "/home/dev",
            "originator": "codex_cli_rs",
            "cli_version": version,
            "source": "cli",
        }

    def at(self, seconds: float = 1.0) -> str:
        self.clock += seconds
        minutes, secs = divmod(self.clock, 60)
        base_h, base_m, base_s = (int(x) for x in self.start[-8:].split(":"))
        total = base_h * 3600 + base_m * 60 + base_s + int(self.clock)
        return f"{self.start[:-8]}{total // 3600:02d}:{total % 3600 // 60:02d}:{total % 60:02d}.{int(secs * 1000) % 1000:03d}Z"

    def add(self, kind: str, payload: dict, seconds: float = 1.0) -> None:
        self.records.append({"timestamp": self.at(seconds), "type": kind, "payload": payload})

    def user(self, text: str) -> None:
        content = [{"type": "input_text", "text": text}]
        self.add("response_item", {"type": "message", "role": "user", "content": content})

    def call(self, name: str, arguments: dict, call_id: str, output, seconds=2.0) -> None:
        self.add(
            "response_item",
            {
                "type": "function_call",
                "name": name,
                "arguments": json.dumps(arguments),
                "call_id": call_id,
            },
        )
        self.add(
            "response_item",
            {"type": "function_call_output", "call_id": call_id, "output": output},
            seconds,
        )

    def custom(self, name: str, source: str, call_id: str, output) -> None:
        self.add(
            "response_item",
            {
                "type": "custom_tool_call",
                "status": "completed",
                "call_id": call_id,
                "name": name,
                "input": source,
            },
        )
        self.add(
            "response_item",
            {"type": "custom_tool_call_output", "call_id": call_id, "output": output},
            20,
        )


def _unified(
    output: str, chunk: str, wall: float, exit_code=None, session=None, tokens=None
) -> str:
    """unified_exec.rs format_response."""
    sections = [f"Chunk ID: {chunk}", f"Wall time: {wall:.4f} seconds"]
    if exit_code is not None:
        sections.append(f"Process exited with code {exit_code}")
    if session is not None:
        sections.append(f"Process running with session ID {session}")
    if tokens is not None:
        sections.append(f"Original token count: {tokens}")
    return "\n".join([*sections, "Output:", output])


ENV = "<environment_context>\n  <cwd>/home/dev</cwd>\n  <approval_policy>on-request</approval_policy>\n  <sandbox_mode>workspace-write</sandbox_mode>\n  <shell>bash</shell>\n</environment_context>"
QWEN = "python3 -m sglang.launch_server --model-path /models/Qwen2.5-72B-Instruct --tp-size 2 --mem-fraction-static 0.8 --port 30000"


def codex_unified_exec() -> None:
    """The story of codex_gpus_busy_then_oom, with exec_command / write_stdin."""
    old = _old_codex()
    smi = old["call_Qw72b01xK9"]
    oom = _lines(SOURCE / "oom_other_process.log")
    r = Rollout("0.98.0")
    r.add("session_meta", {**r.meta, "timestamp": "2026-03-17T13:23:40.101Z"}, 0.1)
    r.user(ENV)
    r.user("serve Qwen2.5-72B-Instruct with sglang on this box, tp 2, port 30000")
    r.call("exec_command", {"cmd": "nvidia-smi", "yield_time_ms": 10000}, "call_U1smi",
           _unified(smi, "4c1f0e", 0.4127, exit_code=0, tokens=812), 1)  # fmt: skip
    r.call("exec_command", {"cmd": QWEN, "yield_time_ms": 10000, "max_output_tokens": 6000},
           "call_U2launch", _unified("\n".join(oom[:15]), "a2d913", 10.0021, session=41352), 10)  # fmt: skip
    r.call("write_stdin", {"session_id": 41352, "chars": "", "yield_time_ms": 60000},
           "call_U3wait", _unified("\n".join(oom[15:]), "a2d914", 38.5518, exit_code=1), 38)  # fmt: skip
    r.user(
        "<turn_aborted>\nThe user interrupted the previous turn on purpose. Any running unified exec processes were terminated. If any tools/commands were aborted, they may have partially executed; verify current state before retrying.\n</turn_aborted>"
    )
    r.user("oom? that training run on 0,1 is mine, leave it. use the other two gpus")
    first = [ln for ln in oom[:40] if "Scheduler hit" not in ln]
    ready = [*first, "[2026-03-17 13:28:30] INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
             "[2026-03-17 13:28:31] The server is fired up and ready to roll!"]  # fmt: skip
    r.call("exec_command", {"cmd": f"CUDA_VISIBLE_DEVICES=2,3 {QWEN}", "yield_time_ms": 10000},
           "call_U4launch", _unified("\n".join(first[:20]), "b7e001", 10.0017, session=41377), 10)  # fmt: skip
    r.call("write_stdin", {"session_id": 41377, "chars": "", "yield_time_ms": 120000},
           "call_U5wait", _unified("\n".join(ready[20:]), "b7e002", 120.0008, session=41377), 120)  # fmt: skip
    r.call("exec_command", {"cmd": "curl -sf http://127.0.0.1:30000/health && echo healthy"},
           "call_U6health", _unified("healthy", "c00a17", 0.0311, exit_code=0))  # fmt: skip
    _write_jsonl(HERE / "codex_unified_exec_gpus_busy_then_oom.jsonl", r.records)


def codex_shell_command_zst() -> None:
    """The same story with shell_command, a `!nvidia-smi` the user ran, as a cold .jsonl.zst."""
    old = _old_codex()
    r = Rollout("0.63.0")
    r.add("session_meta", {**r.meta, "id": "019a77d0-5e21-7b10-8c3f-1d2e3f405162", "timestamp": "2026-03-17T13:23:40.101Z"}, 0.1)  # fmt: skip
    r.user(ENV)
    r.user(
        "<user_shell_command>\n<command>\nnvidia-smi\n</command>\n<result>\nExit code: 0\n"
        f"Duration: 0.4127 seconds\nOutput:\n{old['call_Qw72b01xK9']}\n\n</result>\n</user_shell_command>"
    )
    r.user("serve Qwen2.5-72B-Instruct with sglang on this box, tp 2, port 30000")
    launch = f"nohup {QWEN} > /tmp/sglang_qwen72b.log 2>&1 &"

    def text(output: str, wall: float, code: int = 0) -> str:
        return f"Exit code: {code}\nWall time: {wall} seconds\nOutput:\n{output}"

    r.call("shell_command", {"command": launch, "workdir": "/home/dev", "timeout_ms": 120000},
           "call_S1launch", text("", 0.4))  # fmt: skip
    r.call("shell_command", {"command": "sleep 60; tail -n 70 /tmp/sglang_qwen72b.log"},
           "call_S2tail", text(old["call_Qw72b03xK9"], 60.2), 60)  # fmt: skip
    r.user("oom? that training run on 0,1 is mine, leave it. use the other two gpus")
    r.call(
        "shell_command",
        {"command": f"CUDA_VISIBLE_DEVICES=2,3 {launch}"},
        "call_S3launch",
        text("", 0.4),
    )
    poll = "for i in $(seq 1 60); do curl -sf http://127.0.0.1:30000/health >/dev/null && echo healthy && break; sleep 5; done"
    r.call("shell_command", {"command": poll}, "call_S4health", text("healthy", 156.3), 156)
    data = "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in r.records).encode()
    out = HERE / "codex_shell_command_zst_gpus_busy_then_oom.jsonl.zst"
    out.write_bytes(zstandard.ZstdCompressor(level=19).compress(data))


def codex_earliest_rollout() -> None:
    """A rollout of the first codex-rs releases: bare {id, timestamp} line, bare items."""
    log = _lines(REAL / "unrecognized_num_speculative_tokens.log")
    command = "python -m sglang.launch_server --model-path fixtures/models/llama-target --device cpu --num-speculative-tokens 4"
    records = [
        {"id": "5973b6c0-94b8-487b-a530-2aeb6098ae0e", "timestamp": "2025-05-07T17:24:21.000Z"},
        {"record_type": "state"},
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "start the sglang server on the llama-target model, cpu, 4 speculative tokens"}]},
        {"type": "function_call", "name": "shell", "arguments": json.dumps({"command": ["bash", "-lc", command], "timeout": 120000}), "call_id": "call_e1"},
        {"type": "function_call_output", "call_id": "call_e1", "output": json.dumps({"output": "\n".join(log) + "\n", "metadata": {"exit_code": 2, "duration_seconds": 4.1}})},
        {"record_type": "state"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "The server rejected --num-speculative-tokens."}]},
    ]  # fmt: skip
    _write_jsonl(HERE / "codex_earliest_rollout_unrecognized.jsonl", records)


def codex_code_mode_apply_patch() -> None:
    """A launch script written with apply_patch, run and read back from a code-mode cell."""
    log = _lines(REAL / "spec_eagle3_topk_without_steps.log")
    launch = "python -m sglang.launch_server --model-path /models/llama-target --device cpu --speculative-algorithm EAGLE3 --speculative-draft-model-path /models/eagle3-draft --speculative-eagle-topk 4 --speculative-num-draft-tokens 8"
    r = Rollout("0.118.0")
    r.add("session_meta", {**r.meta, "id": "019d02aa-71c4-7e58-a0b6-3c9e5d7f1a24", "timestamp": "2026-03-17T13:23:40.101Z"}, 0.1)  # fmt: skip
    r.user(ENV)
    r.user(
        "<skill>\n<name>gpu-server</name>\n<path>/home/dev/.codex/skills/gpu-server/SKILL.md</path>\nRun servers with nohup and keep their logs; if a launch failed, read the log.\n</skill>"
    )
    r.user("write a launch script for EAGLE3 on the cpu box (topk 4, 8 draft tokens) and start it")
    patch = f"*** Begin Patch\n*** Add File: /workspace/serve_eagle3.sh\n+#!/usr/bin/env bash\n+set -e\n+cd /workspace\n+{launch}\n*** End Patch\n"
    r.custom(
        "apply_patch",
        patch,
        "call_C1patch",
        "Success. Updated the following files:\nA /workspace/serve_eagle3.sh\n",
    )
    cell = (
        '// @exec: {"yield_time_ms": 30000}\n'
        'await tools.exec_command({cmd: "nohup bash /workspace/serve_eagle3.sh > /workspace/serve.log 2>&1 &"});\n'
        'const r = await tools.exec_command({cmd: "sleep 20; tail -n 40 /workspace/serve.log", yield_time_ms: 25000});\n'
        "text(r.output);\n"
    )
    items = [
        {"type": "input_text", "text": "Script completed\nWall time 21.4 seconds\nOutput:\n"},
        {"type": "input_text", "text": "\n".join(log)},
    ]
    r.custom("exec", cell, "call_C2cell", items)
    r.user(
        '<subagent_notification>\n{"agent_id": "019d02ab-0000", "status": "failed"}\n</subagent_notification>'
    )
    _write_jsonl(HERE / "codex_code_mode_apply_patch_spec_assertion.jsonl", r.records)


# --------------------------------------------------------------------------- claude

SESSION = "b41e7f20-6c3a-4d8e-9f15-2a7c0e9d3b64"
TASKS = "/tmp/claude-0/-home-dev-eagle3/tasks"
KIMI = "ssh root@10.1.230.174 'cd /data/eagle3 && NCCL_P2P_DISABLE=0 python3 -m sglang.launch_server --model-path /data/models/Kimi-K2.5 --tp 8 --trust-remote-code --speculative-algorithm EAGLE3 --speculative-draft-model-path /data/eagle3/synth_100k/drafter --speculative-eagle-topk 1 {spec} --port 30000'"


class Claude:
    def __init__(self, session: str, version: str = "2.1.31", sidechain: bool = False) -> None:
        self.records: list[dict] = []
        self.session = session
        self.version = version
        self.sidechain = sidechain
        self.n = 0
        self.seconds = 0

    def _base(self, kind: str) -> dict:
        self.n += 1
        self.seconds += 7
        m, s = divmod(self.seconds, 60)
        h, m = divmod(m + 12, 60)
        uuid = f"{self.session[:8]}-0000-4000-8000-{self.n:012d}"
        record = {
            "parentUuid": self.records[-1].get("uuid") if self.records else None,
            "isSidechain": self.sidechain, "userType": "external", "cwd": "/home/dev/eagle3",
            "sessionId": self.session, "version": self.version, "gitBranch": "main", "type": kind,
            "uuid": uuid, "timestamp": f"2026-02-24T{9 + h:02d}:{m:02d}:{s:02d}.000Z",
        }  # fmt: skip
        return record

    def raw(self, record: dict) -> None:
        self.records.append(record)

    def user(self, text: str, **extra) -> None:
        self.records.append(
            {**self._base("user"), "message": {"role": "user", "content": text}, **extra}
        )

    def tool(
        self, name: str, tool_id: str, arguments: dict, content: str, result=None, is_error=False
    ) -> None:
        use = {"type": "tool_use", "id": tool_id, "name": name, "input": arguments}
        message = {"id": f"msg_{tool_id[-6:]}", "type": "message", "role": "assistant", "model": "claude-opus-4-5", "content": [use], "stop_reason": "tool_use"}  # fmt: skip
        self.records.append({**self._base("assistant"), "message": message})
        answer = {
            "tool_use_id": tool_id,
            "type": "tool_result",
            "content": content,
            "is_error": is_error,
        }
        record = {**self._base("user"), "message": {"role": "user", "content": [answer]}}
        if result is not None:
            record["toolUseResult"] = result
        self.records.append(record)


def _task_output(task: str, status: str, output: str, exit_code=None, retrieval="success") -> str:
    parts = [f"<retrieval_status>{retrieval}</retrieval_status>", f"<task_id>{task}</task_id>",
             "<task_type>local_bash</task_type>", f"<status>{status}</status>"]  # fmt: skip
    if exit_code is not None:
        parts.append(f"<exit_code>{exit_code}</exit_code>")
    if output.strip():
        parts.append(f"<output>\n{output.rstrip()}\n</output>")
    return "\n\n".join(parts)


def _background(task: str) -> tuple[str, dict]:
    text = f"Command running in background with ID: {task}. Output is being written to: {TASKS}/{task}.output"
    return text, {
        "stdout": "",
        "stderr": "",
        "interrupted": False,
        "isImage": False,
        "backgroundTaskId": task,
    }


def _notification(task: str, status: str, description: str, exit_code: int) -> str:
    summary = (
        f'Background command "{description}" failed with exit code {exit_code}'
        if status == "failed"
        else f'Background command "{description}" completed (exit code {exit_code})'
    )
    return (
        f"<task-notification>\n<task-id>{task}</task-id>\n<output-file>{TASKS}/{task}.output</output-file>\n"
        f"<status>{status}</status>\n<summary>{summary}</summary>\n</task-notification>\n"
        f"Read the output file to retrieve the result: {TASKS}/{task}.output"
    )


def claude_background_shells() -> None:
    """The story of claude_unrecognized_then_assertion, with 2.1 background shells."""
    usage = _lines(REAL / "unrecognized_num_speculative_tokens.log")
    spec = _lines(REAL / "spec_eagle3_topk_without_steps.log")
    c = Claude(SESSION)
    c.raw({"type": "permission-mode", "permissionMode": "acceptEdits", "sessionId": SESSION})
    c.raw({"type": "file-history-snapshot", "messageId": "0b1c2d3e-0000-4000-8000-000000000001", "snapshot": {"messageId": "0b1c2d3e-0000-4000-8000-000000000001", "trackedFileBackups": {}, "timestamp": "2026-02-24T09:12:00.000Z"}, "isSnapshotUpdate": False})  # fmt: skip
    c.raw({"type": "queue-operation", "operation": "enqueue", "timestamp": "2026-02-24T09:12:01.000Z", "sessionId": SESSION, "content": "training finished: deploy the new drafter with sglang on all 8 GPUs, EAGLE3, 4 draft tokens"})  # fmt: skip
    c.raw({"type": "queue-operation", "operation": "dequeue", "timestamp": "2026-02-24T09:12:01.500Z", "sessionId": SESSION})  # fmt: skip
    c.user(
        "training finished: deploy the new drafter with sglang on all 8 GPUs, EAGLE3, 4 draft tokens"
    )
    text, result = _background("b7k2m9q4x")
    c.tool("Bash", "toolu_01Bg0001", {"command": KIMI.format(spec="--num-speculative-tokens 4"), "description": "Launch SGLang with the new drafter", "run_in_background": True}, text, result)  # fmt: skip
    c.user(
        _notification("b7k2m9q4x", "failed", "Launch SGLang with the new drafter", 2), isMeta=False
    )
    c.user("<system-reminder>\nBackground Bash b7k2m9q4x (command: ssh root@10.1.230.174 ...) has new output: 478 lines.\n</system-reminder>", isMeta=True)  # fmt: skip
    c.tool("TaskOutput", "toolu_01Bg0002", {"task_id": "b7k2m9q4x", "block": True, "timeout": 30000},
           _task_output("b7k2m9q4x", "failed", "\n".join(usage), 2),
           {"retrieval_status": "success", "task": {"task_id": "b7k2m9q4x", "task_type": "local_bash", "status": "failed", "description": "Launch SGLang with the new drafter", "output": "\n".join(usage) + "\n", "exitCode": 2}})  # fmt: skip
    c.user("crashed")
    c.tool("Bash", "toolu_01Bg0003", {"command": "ssh root@10.1.230.174 'python3 -m sglang.launch_server --help 2>/dev/null | grep -A1 -- --speculative-num'", "description": "Find SGLang's name for the draft token flag"},
           "  --speculative-num-steps SPECULATIVE_NUM_STEPS\n  --speculative-num-draft-tokens SPECULATIVE_NUM_DRAFT_TOKENS",
           {"stdout": "  --speculative-num-steps SPECULATIVE_NUM_STEPS\n  --speculative-num-draft-tokens SPECULATIVE_NUM_DRAFT_TOKENS", "stderr": "", "interrupted": False, "isImage": False})  # fmt: skip
    text, result = _background("bq3n8w1z5")
    c.tool("Bash", "toolu_01Bg0004", {"command": KIMI.format(spec="--speculative-num-draft-tokens 4"), "description": "Relaunch with --speculative-num-draft-tokens", "run_in_background": True}, text, result)  # fmt: skip
    c.user(_notification("bq3n8w1z5", "failed", "Relaunch with --speculative-num-draft-tokens", 1))
    numbered = "\n".join(f"{i:>6}\t{line}" for i, line in enumerate(spec, 1))
    c.tool("Read", "toolu_01Bg0005", {"file_path": f"{TASKS}/bq3n8w1z5.output"}, numbered,
           {"type": "text", "file": {"filePath": f"{TASKS}/bq3n8w1z5.output", "content": "\n".join(spec), "numLines": len(spec), "startLine": 1, "totalLines": len(spec)}})  # fmt: skip
    c.user("crashed again")
    text, result = _background("bh6t4r2c8")
    c.tool("Bash", "toolu_01Bg0006", {"command": KIMI.format(spec="--speculative-num-steps 3 --speculative-num-draft-tokens 4"), "description": "Relaunch with --speculative-num-steps 3", "run_in_background": True}, text, result)  # fmt: skip
    ready = [*spec[:12], "[2026-02-24 09:29:40] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)", "[2026-02-24 09:29:41] The server is fired up and ready to roll!"]  # fmt: skip
    c.tool("TaskOutput", "toolu_01Bg0007", {"task_id": "bh6t4r2c8", "block": False}, _task_output("bh6t4r2c8", "running", "\n".join(ready), retrieval="not_ready"))  # fmt: skip
    c.tool("Bash", "toolu_01Bg0008", {"command": "ssh root@10.1.230.174 'curl -sf http://localhost:30000/health >/dev/null && echo UP'", "description": "Check the server answers"}, "UP", {"stdout": "UP", "stderr": "", "interrupted": False, "isImage": False})  # fmt: skip
    c.user("works now, thanks")
    _write_jsonl(HERE / "claude_background_unrecognized_then_assertion.jsonl", c.records)


def claude_subagent_persisted() -> None:
    """A sub-agent launches the server; its log comes back as <persisted-output>."""
    folder = HERE / "claude_subagent_persisted_output"
    shutil.rmtree(folder, ignore_errors=True)
    session = "d83a51c6-0f27-4b9e-8e40-5c1b7a2f9d03"
    usage = "\n".join(_lines(REAL / "unrecognized_num_speculative_tokens.log"))
    command = "python -m sglang.launch_server --model-path fixtures/models/llama-target --device cpu --num-speculative-tokens 4"
    main = Claude(session, "2.1.40")
    main.raw({"type": "file-history-snapshot", "messageId": "aa000000-0000-4000-8000-000000000001", "snapshot": {"messageId": "aa000000-0000-4000-8000-000000000001", "trackedFileBackups": {}, "timestamp": "2026-02-24T09:12:00.000Z"}, "isSnapshotUpdate": False})  # fmt: skip
    main.user(
        "have an agent bring up sglang on the cpu box with 4 speculative tokens and tell me if it works"
    )
    agent = Claude(session, "2.1.40", sidechain=True)
    agent.seconds = main.seconds
    agent.records.append({**agent._base("user"), "agentId": "a4f19c2", "message": {"role": "user", "content": "Start the SGLang server (llama-target, --device cpu, 4 speculative tokens) and report whether it comes up."}})  # fmt: skip
    agent.tool("Bash", "toolu_01Sub001", {"command": f"nohup {command} > /tmp/sglang_cpu.log 2>&1 &", "description": "Start the server"}, "", {"stdout": "", "stderr": "", "interrupted": False, "isImage": False})  # fmt: skip
    full_id = "toolu_01Sub002"
    saved = f"/home/dev/.claude/projects/-home-dev-eagle3/{session}/tool-results/{full_id}.txt"
    preview = usage[:2000]
    persisted = f"<persisted-output>\nOutput too large ({len(usage) / 1024:.1f}KB). Full output saved to: {saved}\n\nPreview (first 2KB):\n{preview}\n...\n</persisted-output>"
    agent.tool("Bash", full_id, {"command": "sleep 15; cat /tmp/sglang_cpu.log", "description": "Read the server log"}, persisted,
               {"stdout": preview, "stderr": "", "interrupted": False, "isImage": False})  # fmt: skip
    for record in agent.records:
        record["agentId"] = "a4f19c2"
    main.seconds = agent.seconds
    main.tool("Task", "toolu_01Task01", {"description": "Bring up SGLang", "prompt": "Start the SGLang server (llama-target, --device cpu, 4 speculative tokens) and report whether it comes up.", "subagent_type": "general-purpose"},
              "The server did not start: argparse rejected --num-speculative-tokens.", {"status": "completed", "agentId": "a4f19c2"})  # fmt: skip
    _write_jsonl(folder / f"{session}.jsonl", main.records)
    _write_jsonl(folder / session / "subagents" / "agent-a4f19c2.jsonl", agent.records)
    results = folder / session / "tool-results"
    results.mkdir(parents=True, exist_ok=True)
    (results / f"{full_id}.txt").write_text(usage + "\n", "utf-8")


# --------------------------------------------------------------------------- opencode


def _storage_rows(storage: Path, session_id: str, project: str, shift_ms: int):
    messages, parts = [], []
    for file in sorted((storage / "message").glob("*/*.json")):
        info = json.loads(file.read_text("utf-8"))
        info["time"] = {k: v + shift_ms for k, v in info["time"].items()}
        created = info["time"]["created"]
        data = {k: v for k, v in info.items() if k not in ("id", "sessionID")}
        messages.append(
            (
                info["id"].replace("msg_5b0e7c", "msg_3a9d41"),
                session_id,
                created,
                created,
                json.dumps(data),
            )
        )
        for part_file in sorted((storage / "part" / info["id"]).glob("*.json")):
            part = json.loads(part_file.read_text("utf-8"))
            rest = {k: v for k, v in part.items() if k not in ("id", "sessionID", "messageID")}
            parts.append(
                (
                    part["id"].replace("prt_5b0e7c", "prt_3a9d41"),
                    messages[-1][0],
                    session_id,
                    created,
                    created,
                    json.dumps(rest),
                )
            )
    return messages, parts


def _export_rows(export: Path):
    data = json.loads(export.read_text("utf-8"))
    session = data["info"]
    messages, parts = [], []
    for message in data["messages"]:
        info = message["info"]
        created = info["time"]["created"]
        rest = {k: v for k, v in info.items() if k not in ("id", "sessionID")}
        messages.append((info["id"], info["sessionID"], created, created, json.dumps(rest)))
        for part in message["parts"]:
            body = {k: v for k, v in part.items() if k not in ("id", "sessionID", "messageID")}
            parts.append(
                (part["id"], info["id"], info["sessionID"], created, created, json.dumps(body))
            )
    return session, messages, parts


SCHEMA = (
    "CREATE TABLE project (id TEXT PRIMARY KEY, worktree TEXT NOT NULL, time_created INTEGER, time_updated INTEGER);"
    "CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT NOT NULL, parent_id TEXT, slug TEXT NOT NULL,"
    " directory TEXT NOT NULL, title TEXT NOT NULL, version TEXT NOT NULL, time_created INTEGER, time_updated INTEGER,"
    " time_archived INTEGER);"
    "CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL, time_created INTEGER, time_updated INTEGER,"
    " data TEXT NOT NULL);"
    "CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL,"
    " time_created INTEGER, time_updated INTEGER, data TEXT NOT NULL);"
)


def opencode_two_sessions() -> None:
    """opencode.db with an unrelated older session and, in the WAL only, the story of
    opencode_export_log_folder_missing."""
    folder = HERE / "opencode_db_two_sessions"
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir()
    work = folder / "work"
    work.mkdir()
    db = sqlite3.connect(work / "opencode.db")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA wal_autocheckpoint=0")
    db.executescript(SCHEMA)
    storage = HERE / "opencode_storage_bash_c_quoting" / "storage"
    other = "ses_3a9d41b07ffeR2mWq5zKc8hJ"
    shift = -9 * 24 * 3600 * 1000
    messages, parts = _storage_rows(storage, other, "c0ffee", shift)
    db.execute(
        "INSERT INTO project VALUES (?, ?, ?, ?)",
        ("c0ffee00", "/home/dev/qwen-smoke", 1771000000000, 1771000000000),
    )
    db.execute("INSERT INTO session VALUES (?, ?, NULL, ?, ?, ?, ?, ?, ?, NULL)",
               (other, "c0ffee00", "qwen-smoke", "/home/dev/qwen-smoke", "Relaunch through bash -c", "1.0.120", messages[0][2], messages[-1][2]))  # fmt: skip
    db.executemany("INSERT INTO message VALUES (?, ?, ?, ?, ?)", messages)
    db.executemany("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)", parts)
    db.commit()
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    info, messages, parts = _export_rows(HERE / "opencode_export_log_folder_missing.json")
    db.execute("INSERT INTO project VALUES (?, ?, ?, ?)", (info["projectID"], info["directory"], info["time"]["created"], info["time"]["updated"]))  # fmt: skip
    db.execute("INSERT INTO session VALUES (?, ?, NULL, ?, ?, ?, ?, ?, ?, NULL)",
               (info["id"], info["projectID"], info["slug"], info["directory"], info["title"], info["version"], info["time"]["created"], info["time"]["updated"]))  # fmt: skip
    db.executemany("INSERT INTO message VALUES (?, ?, ?, ?, ?)", messages)
    db.executemany("INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)", parts)
    db.commit()
    # opencode is still running: its rows since the last checkpoint are only in the WAL
    shutil.copyfile(work / "opencode.db", folder / "opencode.db")
    shutil.copyfile(work / "opencode.db-wal", folder / "opencode.db-wal")
    db.close()
    shutil.rmtree(work)


def opencode_truncated_output() -> None:
    """A storage folder whose bash part kept only the head of a long log; the full output
    is in tool-output/ beside it (tool/truncation.ts)."""
    folder = HERE / "opencode_storage_truncated_output"
    shutil.rmtree(folder, ignore_errors=True)
    storage = folder / "storage"
    log = _lines(SOURCE / "watchdog_timeout_tp8.log")
    cut = next(i for i, line in enumerate(log) if "watchdog timeout" in line) - 1
    decode = [
        f"[2026-03-20 02:{13 + i // 600:02d}:{i // 10 % 60:02d} TP0] Decode batch, #running-req: {8 + i % 5}, #token: {4000 + 37 * (i % 90)}, token usage: 0.0{i % 7}, cuda graph: True, gen throughput (token/s): {410 + i % 23}.{i % 97:02d}, #queue-req: 0"
        for i in range(2100)
    ]  # fmt: skip
    full = "\n".join([*log[:cut], *decode, *log[cut:]])
    head = full.split("\n")[:2000]
    tool_id = "tool_9c41d2e87001Xy3pTq6wLm0n"
    saved = f"/root/.local/share/opencode/tool-output/{tool_id}"
    removed = len(full.split("\n")) - 2000
    hint = f"The tool call succeeded but the output was truncated. Full output saved to: {saved}\nUse Grep to search the full content or Read with offset/limit to view specific sections."
    shown = "\n".join(head) + f"\n\n...{removed} lines truncated...\n\n{hint}"
    session = "ses_2f8b90c1dffeA7kLw2nRt5Yq"
    project = "5e6f7a8b9c0d1e2f3a4b5c6d7e8f9a0b1c2d3e4f"
    t0 = 1773972600000
    command = "python3 -m sglang.launch_server --model-path /models/DeepSeek-V3-0324 --tp-size 8 --trust-remote-code --watchdog-timeout 300 --port 30000 > /data/logs/dsv3.log 2>&1 &"
    files = {
        f"session/{project}/{session}.json": {"id": session, "slug": "dsv3", "projectID": project, "directory": "/home/dev/dsv3", "title": "DeepSeek-V3 TP8", "version": "1.2.27", "time": {"created": t0, "updated": t0 + 900000}},
        f"message/{session}/msg_2f8b90c10001A7kLw2nRt5Yq.json": {"id": "msg_2f8b90c10001A7kLw2nRt5Yq", "sessionID": session, "role": "user", "time": {"created": t0 + 1000}},
        "part/msg_2f8b90c10001A7kLw2nRt5Yq/prt_2f8b90c10002A7kLw2nRt5Yq.json": {"id": "prt_2f8b90c10002A7kLw2nRt5Yq", "sessionID": session, "messageID": "msg_2f8b90c10001A7kLw2nRt5Yq", "type": "text", "text": "start deepseek v3 on the 8 gpus, watchdog 300s, log to /data/logs/dsv3.log"},
        f"message/{session}/msg_2f8b90c10003A7kLw2nRt5Yq.json": {"id": "msg_2f8b90c10003A7kLw2nRt5Yq", "sessionID": session, "role": "assistant", "time": {"created": t0 + 5000}},
        "part/msg_2f8b90c10003A7kLw2nRt5Yq/prt_2f8b90c10004A7kLw2nRt5Yq.json": {"id": "prt_2f8b90c10004A7kLw2nRt5Yq", "sessionID": session, "messageID": "msg_2f8b90c10003A7kLw2nRt5Yq", "type": "tool", "callID": "toolu_dsv3launch", "tool": "bash", "state": {"status": "completed", "input": {"command": command, "description": "Start the server"}, "output": "", "metadata": {"output": "", "exit": 0, "description": "Start the server", "truncated": False}, "title": command, "time": {"start": t0 + 5000, "end": t0 + 5400}}},
        f"message/{session}/msg_2f8b90c10005A7kLw2nRt5Yq.json": {"id": "msg_2f8b90c10005A7kLw2nRt5Yq", "sessionID": session, "role": "assistant", "time": {"created": t0 + 800000}},
        "part/msg_2f8b90c10005A7kLw2nRt5Yq/prt_2f8b90c10006A7kLw2nRt5Yq.json": {"id": "prt_2f8b90c10006A7kLw2nRt5Yq", "sessionID": session, "messageID": "msg_2f8b90c10005A7kLw2nRt5Yq", "type": "tool", "callID": "toolu_dsv3cat", "tool": "bash", "state": {"status": "completed", "input": {"command": "cat /data/logs/dsv3.log", "description": "Show the server log"}, "output": shown, "metadata": {"output": shown, "exit": 0, "description": "Show the server log", "truncated": True, "outputPath": saved}, "title": "cat /data/logs/dsv3.log", "time": {"start": t0 + 800000, "end": t0 + 800300}}},
    }  # fmt: skip
    for name, value in files.items():
        path = storage / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(value, indent=2) + "\n", "utf-8")
    out = folder / "tool-output"
    out.mkdir(parents=True)
    (out / tool_id).write_text(full, "utf-8")


if __name__ == "__main__":
    codex_unified_exec()
    codex_shell_command_zst()
    codex_earliest_rollout()
    codex_code_mode_apply_patch()
    claude_background_shells()
    claude_subagent_persisted()
    opencode_two_sessions()
    opencode_truncated_output()

"""Transcripts as today's coding tools write them: each new shape tells the same story as
the older-shape fixture, and the pieces each reader needs (fixtures/transcripts/, made by
scripts/generate_transcript_fixtures.py)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from analyzer.core.read import InputError, TextInput
from analyzer.pipeline import Options, analyze
from analyzer.transcripts import codex_shapes, detect
from analyzer.transcripts.opencode import connect_read_only
from tests.fixture_cases import ROOT

HERE = ROOT / "fixtures" / "transcripts"
DB = HERE / "opencode_db_two_sessions" / "opencode.db"
STORY = "ses_5b0e7c2a1ffeQk3nV8xLmP2rTz"
OTHER = "ses_3a9d41b07ffeR2mWq5zKc8hJ"


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


def _timeline(path: Path, **options) -> list[tuple[int, str, str | None]]:
    report = analyze([str(path)], Options(**options))
    return [(a.number, a.outcome, a.rule_class) for a in report.attempts]


@pytest.mark.parametrize(
    ("new", "old"),
    [
        ("codex_unified_exec_gpus_busy_then_oom.jsonl", "codex_gpus_busy_then_oom.jsonl"),
        ("codex_shell_command_zst_gpus_busy_then_oom.jsonl.zst", "codex_gpus_busy_then_oom.jsonl"),
        (
            "claude_background_unrecognized_then_assertion.jsonl",
            "claude_unrecognized_then_assertion.jsonl",
        ),
        ("opencode_db_two_sessions/opencode.db", "opencode_export_log_folder_missing.json"),
    ],
)
def test_a_new_shape_tells_the_same_story(new, old):
    assert _timeline(HERE / new) == _timeline(HERE / old)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("codex_unified_exec_gpus_busy_then_oom.jsonl", "transcript_codex"),
        ("codex_shell_command_zst_gpus_busy_then_oom.jsonl.zst", "transcript_codex"),
        ("codex_earliest_rollout_unrecognized.jsonl", "transcript_codex"),
        ("claude_background_unrecognized_then_assertion.jsonl", "transcript_claude"),
        ("opencode_db_two_sessions/opencode.db", "transcript_opencode"),
    ],
)
def test_detection_looks_past_bookkeeping_and_compression(name, kind):
    path = HERE / name
    assert detect.detect_kind(TextInput(str(path), path)) == kind


def test_a_file_of_bookkeeping_lines_only_is_still_claude():
    lines = [
        json.dumps({"type": "file-history-snapshot", "messageId": "m", "snapshot": {}}),
        json.dumps({"type": "permission-mode", "permissionMode": "default"}),
    ]
    assert detect.sniff_text("\n".join(lines) + "\n") == "transcript_claude"
    assert detect.sniff_text('{"type": "something-else"}\n') is None


# --------------------------------------------------------------------------- codex


def test_the_crash_in_a_write_stdin_chunk_is_the_launchs_output():
    report = analyze([str(HERE / "codex_unified_exec_gpus_busy_then_oom.jsonl")])
    ooms = [i for i in report.incidents if i.rule_class == "oom"]
    assert {i.evidence[-1].ref for i in ooms} == {"call_U3wait"}
    decisive = next(ln for ln in ooms[0].evidence if ln.number == ooms[0].line)
    assert decisive.text.startswith("torch.OutOfMemoryError")  # the header is not counted


@pytest.mark.parametrize(
    ("raw", "text", "code", "session"),
    [
        ("Chunk ID: a1\nWall time: 10.0010 seconds\nProcess running with session ID 7\nOutput:\nstarting", "starting", None, "7"),
        ("Chunk ID: a2\nWall time: 1.5000 seconds\nProcess exited with code 1\nOriginal token count: 9\nOutput:\nboom\n", "boom\n", 1, None),
        ("Exit code: 2\nWall time: 0.3 seconds\nTotal output lines: 1\nOutput:\nusage", "usage", 2, None),
        ('{"output": "x", "metadata": {"exit_code": 3, "duration_seconds": 0.1}}', "x", 3, None),
        ([{"type": "input_text", "text": "Exit code: 0\nWall time: 1 seconds\nOutput:\n"}, {"type": "input_text", "text": "ok"}], "ok", 0, None),
        ("plain text\nOutput:\nnot a header", "plain text\nOutput:\nnot a header", None, None),
    ],
)  # fmt: skip
def test_codex_output_forms(raw, text, code, session):
    parsed = codex_shapes.parse_output(raw)
    assert (parsed.text, parsed.exit_code, parsed.session_id) == (text, code, session)


def test_code_mode_cells_give_their_commands():
    source = (
        '// @exec: {"yield_time_ms": 10000}\n'
        "const launch = 'nohup python -m sglang.launch_server --model-path m > /tmp/s.log 2>&1 &';\n"
        "await tools.exec_command({cmd: launch});\n"
        'const r = await tools.exec_command({"cmd": "tail -n 5 /tmp/s.log\\n", yield_time_ms: 500});\n'
        "await tools.exec_command({cmd: `echo ${x}`});\n"
        "text(JSON.stringify(r));\n"
    )
    assert codex_shapes.exec_commands(source) == [
        "nohup python -m sglang.launch_server --model-path m > /tmp/s.log 2>&1 &",
        "tail -n 5 /tmp/s.log\n",
    ]
    result = json.dumps({"wall_time_seconds": 0.5, "exit_code": 0, "output": "done"})
    cell = [{"type": "input_text", "text": "Script completed\nWall time 0.6 seconds\nOutput:\n"}]
    parsed = codex_shapes.cell_output([*cell, {"type": "input_text", "text": result}])
    assert (parsed.text, parsed.exit_code) == ("done", 0)


def test_apply_patch_updates_a_script_it_wrote():
    known: dict[str, str] = {}
    added = "*** Begin Patch\n*** Add File: run.sh\n+cd /w\n+python -m sglang.launch_server --tp 8\n*** End Patch"
    update = (
        "*** Begin Patch\n*** Update File: run.sh\n@@\n cd /w\n"
        "-python -m sglang.launch_server --tp 8\n+python -m sglang.launch_server --tp 4\n*** End Patch"
    )
    assert codex_shapes.patch_writes(added, known) == [
        ("run.sh", "cd /w\npython -m sglang.launch_server --tp 8\n")
    ]
    ((path, content),) = codex_shapes.patch_writes(update, known)
    assert path == "run.sh" and "--tp 4" in content and "--tp 8" not in content


def _rollout(tmp_path: Path, items: list[dict]) -> Path:
    records = [
        {"timestamp": "2026-03-17T13:23:40.000Z", "type": "session_meta", "payload": {"id": "s"}}
    ]
    records += [
        {"timestamp": f"2026-03-17T13:24:{i:02d}.000Z", "type": "response_item", "payload": item}
        for i, item in enumerate(items)
    ]
    path = tmp_path / "rollout.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    return path


def _exec(call_id: str, name: str, arguments: dict, output: str) -> list[dict]:
    return [
        {
            "type": "function_call",
            "name": name,
            "arguments": json.dumps(arguments),
            "call_id": call_id,
        },
        {"type": "function_call_output", "call_id": call_id, "output": output},
    ]


def test_ctrl_c_through_write_stdin_stops_the_foreground_server(tmp_path):
    launch = "python -m sglang.launch_server --model-path m --port 30000"
    started = (
        "Chunk ID: 1\nWall time: 10.0 seconds\nProcess running with session ID 5\nOutput:\nloading"
    )
    stopped = "Chunk ID: 2\nWall time: 0.2 seconds\nProcess exited with code 130\nOutput:\n^C"
    path = _rollout(
        tmp_path,
        [
            *_exec("c1", "exec_command", {"cmd": launch}, started),
            *_exec("c2", "write_stdin", {"session_id": 5, "chars": "\u0003"}, stopped),
        ],
    )
    assert _timeline(path) == [(1, "stopped", None)]


def test_injected_fragments_are_not_the_users_words(tmp_path):
    launch = "python -m sglang.launch_server --model-path m --port 30000"
    ready = (
        "Exit code: 0\nWall time: 30 seconds\nOutput:\nThe server is fired up and ready to roll!"
    )
    notice = "<subagent_notification>\nagent 7 failed\n</subagent_notification>"
    message = {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": notice}],
    }
    path = _rollout(tmp_path, [*_exec("c1", "shell_command", {"command": launch}, ready), message])
    assert _timeline(path) == [(1, "ready", None)]


# --------------------------------------------------------------------------- claude


def _claude(tmp_path: Path, records: list[dict]) -> Path:
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    return path


def _use(uuid: str, tool_id: str, name: str, arguments: dict) -> dict:
    content = [{"type": "tool_use", "id": tool_id, "name": name, "input": arguments}]
    return {
        "type": "assistant",
        "uuid": uuid,
        "sessionId": "s",
        "message": {"role": "assistant", "content": content},
    }


def _answer(uuid: str, tool_id: str, text: str, result: dict | None = None) -> dict:
    content = [{"type": "tool_result", "tool_use_id": tool_id, "content": text, "is_error": False}]
    record = {
        "type": "user",
        "uuid": uuid,
        "sessionId": "s",
        "message": {"role": "user", "content": content},
    }
    return {**record, "toolUseResult": result} if result else record


def test_task_stop_stops_the_background_server(tmp_path):
    launch = "python -m sglang.launch_server --model-path m --port 30000"
    path = _claude(
        tmp_path,
        [
            _use("a1", "t1", "Bash", {"command": launch, "run_in_background": True}),
            _answer("u1", "t1", "Command was manually backgrounded by user with ID: b9", {"backgroundTaskId": "b9"}),
            _use("a2", "t2", "TaskStop", {"task_id": "b9"}),
            _answer("u2", "t2", '{"message": "Successfully stopped task: b9", "task_id": "b9"}'),
        ],
    )  # fmt: skip
    assert _timeline(path) == [(1, "stopped", None)]


def test_a_bang_command_is_a_command_and_harness_text_is_not_the_user(tmp_path):
    smi = "|   0  NVIDIA H100 80GB HBM3   On |   00000000:18:00.0 Off |   0 |\n| N/A 42C P0 412W / 700W |   61458MiB /  81559MiB |  97%  Default |"
    launch = "python -m sglang.launch_server --model-path m --port 30000"
    notification = "<task-notification>\n<task-id>b1</task-id>\n<status>failed</status>\n<summary>Background command failed with exit code 1</summary>\n</task-notification>"
    path = _claude(
        tmp_path,
        [
            {"type": "user", "uuid": "u0", "sessionId": "s", "message": {"role": "user", "content": "<bash-input>nvidia-smi</bash-input>"}},
            {"type": "user", "uuid": "u1", "sessionId": "s", "message": {"role": "user", "content": f"<bash-stdout>{smi}</bash-stdout><bash-stderr></bash-stderr>"}},
            _use("a1", "t1", "Bash", {"command": launch}),
            _answer("u2", "t1", "The server is fired up and ready to roll!"),
            {"type": "user", "uuid": "u3", "sessionId": "s", "message": {"role": "user", "content": notification}},
        ],
    )  # fmt: skip
    report = analyze([str(path)])
    assert [(a.number, a.outcome) for a in report.attempts] == [(1, "ready")]


def test_the_persisted_output_preview_is_used_when_the_file_is_gone(tmp_path):
    folder = HERE / "claude_subagent_persisted_output"
    session = "d83a51c6-0f27-4b9e-8e40-5c1b7a2f9d03"
    copy = tmp_path / "project"
    (copy / session / "subagents").mkdir(parents=True)
    (copy / f"{session}.jsonl").write_bytes((folder / f"{session}.jsonl").read_bytes())
    agent = folder / session / "subagents" / "agent-a4f19c2.jsonl"
    (copy / session / "subagents" / agent.name).write_bytes(agent.read_bytes())
    report = analyze([str(copy / f"{session}.jsonl")])
    # the preview stops inside SGLang's usage text, before argparse's `error:` line: SGLang
    # refused the command, which the failure-signal stage reports without naming the flag
    assert [(i.rule, i.offending_flags) for i in report.incidents] == [("signal-usage", [])]
    assert [a.outcome for a in report.attempts] == ["failed"]
    assert any("only the 2 KB preview" in n for n in report.inputs[0].notes)


# --------------------------------------------------------------------------- opencode


def test_one_session_is_read_and_the_others_are_listed():
    report = analyze([str(DB)])
    (note,) = [n for n in report.inputs[0].notes if n.startswith("opencode session")]
    assert note.startswith(
        f"opencode session {STORY} (EAGLE3 speculative decoding benchmarks) read"
    )
    assert OTHER in note and "--session ID" in note
    other = analyze([str(DB)], Options(session=OTHER))
    assert [i.title for i in other.incidents] == [
        "The server never started: the quoting broke `bash -c '...'`"
    ]
    with pytest.raises(InputError, match=f"no session ses_nope in this database; it holds: .*{OTHER}"):
        analyze([str(DB)], Options(session="ses_nope"))


def test_the_story_lives_only_in_the_write_ahead_log(tmp_path):
    alone = tmp_path / "opencode.db"
    alone.write_bytes(DB.read_bytes())  # the main file without its WAL: the older session only
    with connect_read_only(alone) as (connection, _):
        sessions = {row[0] for row in connection.execute("SELECT session_id FROM message")}
    assert sessions == {OTHER}
    (tmp_path / "opencode.db-wal").write_bytes(Path(f"{DB}-wal").read_bytes())
    with connect_read_only(alone) as (connection, _):
        sessions = {row[0] for row in connection.execute("SELECT session_id FROM message")}
    assert sessions == {OTHER, STORY}


def test_a_database_sqlite_cannot_open_in_place_is_read_from_a_copy_with_its_wal(
    tmp_path, monkeypatch
):
    real = sqlite3.connect
    opened: list[str] = []

    def connect(target, *args, **kwargs):
        opened.append(str(target))
        if str(DB.parent) in str(target):
            raise sqlite3.OperationalError("unable to open database file")
        return real(target, *args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", connect)
    with pytest.raises(sqlite3.OperationalError):
        with connect_read_only(DB):
            pass
    monkeypatch.setattr(sqlite3, "connect", real)

    class Lazy:
        """Fails on the first query, like SQLite in a read-only folder without -shm."""

        def __init__(self, target):
            self.inner, self.failed = real(target, uri=True), "loganalyze-opencode-" not in target

        def execute(self, *args):
            if self.failed:
                raise sqlite3.OperationalError("unable to open database file")
            return self.inner.execute(*args)

        def close(self):
            self.inner.close()

    monkeypatch.setattr(sqlite3, "connect", lambda target, uri=True: Lazy(target))
    with connect_read_only(DB) as (connection, copied):
        sessions = {row[0] for row in connection.execute("SELECT session_id FROM message")}
    assert copied and sessions == {OTHER, STORY}


def test_truncated_bash_output_without_its_file_keeps_the_head(tmp_path):
    import shutil

    copy = tmp_path / "storage"
    shutil.copytree(HERE / "opencode_storage_truncated_output" / "storage", copy)
    report = analyze([str(copy)])
    assert [i.rule_class for i in report.incidents] != ["watchdog_timeout"]
    assert any("only their head was read" in n for n in report.inputs[0].notes)


# --------------------------------------------------------------------------- no readable launch

CRASH = (
    "[2026-01-02 10:00:09 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    '  File "/opt/sglang/python/sglang/srt/model_executor/model_runner.py", line 300, in load_model\n'
    "    self.model = get_model(\n"
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB."
)


def test_a_server_launched_in_a_container_and_its_logs_are_an_attempt(tmp_path):
    launch = (
        "docker run --gpus all -d --shm-size 16g -p 30000:30000 --name llm lmsysorg/sglang:latest "
        "python3 -m sglang.launch_server --model-path /models/m --tp-size 2 --port 30000"
    )
    path = _claude(
        tmp_path,
        [
            _use("a1", "t1", "Bash", {"command": launch}),
            _answer("u1", "t1", "5be1c07a9d"),
            _use("a2", "t2", "Bash", {"command": "docker logs --tail 50 llm"}),
            _answer("u2", "t2", CRASH),
        ],
    )
    report = analyze([str(path)])
    (incident,) = [i for i in report.incidents if i.severity == "fatal"]
    assert incident.rule_class == "oom" and incident.attempt == 1
    assert "--tp-size 2" in incident.command and incident.command.startswith("docker run")


@pytest.mark.parametrize(
    "command",
    ["tail -n 40 /srv/llm/server.log", "./start_server.sh", "journalctl -u llm --no-pager"],
)
def test_sglang_log_text_seen_without_a_readable_launch_still_shows_the_failure(tmp_path, command):
    path = _claude(
        tmp_path, [_use("a1", "t1", "Bash", {"command": command}), _answer("u1", "t1", CRASH)]
    )
    report = analyze([str(path)])
    assert [i.rule_class for i in report.incidents if i.severity == "fatal"] == ["oom"]
    assert report.incidents[0].evidence[-1].ref == "t1"


def test_a_client_script_output_without_a_launch_is_no_server_failure(tmp_path):
    failure = (
        "Traceback (most recent call last):\n"
        '  File "/home/u/bench.py", line 3, in <module>\n'
        "    r.raise_for_status()\n"
        "requests.exceptions.HTTPError: 400 Client Error: Bad Request for url: http://h:30000/generate"
    )
    path = _claude(
        tmp_path,
        [_use("a1", "t1", "Bash", {"command": "python bench.py"}), _answer("u1", "t1", failure)],
    )
    report = analyze([str(path)])
    assert not [i for i in report.incidents if i.severity in ("fatal", "error")]

"""Session transcripts: every format read, attempts followed, deaths without a log explained.

The fixtures under fixtures/transcripts/ also run through the generic fixture runner; these
tests check what a sidecar cannot: the timeline, the second incident, where evidence points,
streaming, the SQLite database, `script` typescripts, and bad input.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.core.read import TextInput
from analyzer.formats.json_report import render_json
from analyzer.formats.terminal import render_plain
from analyzer.pipeline import Options, analyze
from analyzer.sglang.catalog import load_catalog
from analyzer.sglang.launch_command import parse_launch_command
from analyzer.transcripts import command_outputs, detect, shell
from analyzer.transcripts.attempts import build_session
from analyzer.transcripts.diagnose import flag_diff
from analyzer.transcripts.events import ShellCall, UserMessage
from analyzer.transcripts.opencode import message_events
from analyzer.transcripts.reading import read_transcript
from tests.fixture_cases import ROOT

HERE = ROOT / "fixtures" / "transcripts"
CLAUDE = HERE / "claude_unrecognized_then_assertion.jsonl"
EXPORT = HERE / "opencode_export_log_folder_missing.json"
STORAGE = HERE / "opencode_storage_bash_c_quoting" / "storage"
CODEX = HERE / "codex_gpus_busy_then_oom.jsonl"
TERMINAL = HERE / "terminal_nohup_wrong_interpreter.txt"


def _report(path: Path, **options):
    return analyze(
        [str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path)], Options(**options)
    )


def _json(path: Path) -> dict:
    return json.loads(render_json(_report(path)))


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


# --------------------------------------------------------------------------- detection


@pytest.mark.parametrize(
    ("path", "kind"),
    [
        (CLAUDE, "transcript_claude"),
        (EXPORT, "transcript_opencode"),
        (STORAGE, "transcript_opencode"),
        (STORAGE.parent, "transcript_opencode"),
        (CODEX, "transcript_codex"),
        (TERMINAL, "transcript_text"),
        # logs that print one launch line (`+ python3 -m ...`) stay logs
        (ROOT / "fixtures/source/oom_other_process.log", None),
        (ROOT / "fixtures/real/unrecognized_set_x_wrapper.log", None),
    ],
)
def test_the_format_is_judged_by_content(path, kind):
    assert detect.detect_kind(TextInput(str(path), path)) == kind


def test_json_inputs_say_their_kind():
    for path, kind in (
        (CLAUDE, "claude"),
        (EXPORT, "opencode"),
        (CODEX, "codex"),
        (TERMINAL, "text"),
    ):
        assert _json(path)["inputs"][0]["kind"] == f"transcript_{kind}"


def test_input_format_forces_a_reading(tmp_path):
    as_log = _report(CLAUDE, input_format="log")
    assert as_log.inputs[0].kind == "sglang_log" and as_log.attempts == []
    renamed = tmp_path / "session.log"
    shutil.copy(CLAUDE, renamed)
    assert _report(renamed).inputs[0].kind == "transcript_claude"  # the name does not matter


# --------------------------------------------------------------------------- two attempts


def test_unrecognized_then_assertion_gives_two_incidents_a_timeline_and_two_fixes():
    report = _report(CLAUDE)
    first, second = report.incidents
    assert (first.rule_class, first.attempt) == ("argparse_unrecognized", 1)
    assert (second.rule_class, second.attempt) == ("spec_assertion", 2)
    # vLLM's 4 speculated tokens are SGLang's chain of 4 steps, not a bare rename that
    # walks into the speculative assertion (the second attempt's crash)
    assert "--speculative-num-steps 4 --port 30000" in first.corrected_command
    assert "--speculative-num-draft-tokens 5" in first.corrected_command
    assert "--num-speculative-tokens" not in first.corrected_command
    assert "--speculative-num-steps 3" in second.corrected_command
    assert first.corrected_command.startswith("ssh root@10.1.230.174 '")
    assert [(a.number, a.outcome, a.rule_class) for a in report.attempts] == [
        (1, "failed", "argparse_unrecognized"),
        (2, "failed", "spec_assertion"),
        (3, "ready", None),
    ]
    assert all(
        a.log_path == "/data/eagle3/synth_100k/logs/sglang_eagle3_16.log" for a in report.attempts
    )


def test_evidence_points_at_the_tool_result_that_showed_the_log():
    records = [json.loads(line) for line in CLAUDE.read_text("utf-8").splitlines()]
    results = {
        item["tool_use_id"]: item["content"]
        for r in records
        if r["type"] == "user" and isinstance(r["message"]["content"], list)
        for item in r["message"]["content"]
    }
    for incident in _report(CLAUDE).incidents:
        decisive = next(ln for ln in incident.evidence if ln.number == incident.line)
        shown = results[decisive.ref].split("\n")[decisive.number - 1]
        assert decisive.text in shown  # grep's `33:` prefix is stripped from the view
    data = _json(CLAUDE)
    assert [i["attempt"] for i in data["incidents"]] == [1, 2]
    assert data["incidents"][0]["evidence"][-1]["ref"] == "toolu_01Bash0003"
    assert [a["outcome"] for a in data["attempts"]] == ["failed", "failed", "ready"]


# --------------------------------------------------------------------------- silent deaths


def test_death_without_a_log_names_the_evidence_and_the_suspect_part():
    report = _report(EXPORT)
    (incident,) = report.incidents
    assert (incident.rule_class, incident.rule, incident.attempt) == (
        "silent_death",
        "session-silent-death",
        2,
    )
    decisive = next(ln for ln in incident.evidence if ln.number == incident.line)
    start, end = incident.span
    assert decisive.text[start:end] == "/data/eagle3/logs/sglang_eagle3_cg_2step.log"
    assert decisive.ref.endswith(":command")
    texts = [ln.text for ln in incident.evidence]
    assert (
        "bash: line 1: /data/eagle3/logs/sglang_eagle3_cg_2step.log: No such file or directory"
        in texts
    )
    assert sum("0MiB /  97887MiB" in t for t in texts) == 4
    assert "server crashed" in texts
    assert incident.advice[1].startswith("1. The shell could not create the log")
    timeline = report.attempts
    assert [a.outcome for a in timeline] == ["ready", "failed"]
    assert timeline[1].diff_from == 1
    assert [(c.flag, c.before, c.after) for c in timeline[1].flag_diff] == [
        ("--speculative-num-steps", "3", "2")
    ]


def test_broken_bash_c_quoting_is_pointed_at():
    (incident,) = _report(STORAGE).incidents
    decisive = next(ln for ln in incident.evidence if ln.number == incident.line)
    start, end = incident.span
    assert decisive.text[start:end] == "'python3"
    assert incident.title == "The server never started: the quoting broke `bash -c '...'`"
    assert "closes the '...' string given to ssh" in incident.explanation


def test_nohup_failing_to_run_the_interpreter_is_pointed_at():
    report = _report(TERMINAL)
    death = report.incidents[1]
    assert death.title.startswith("The server never started: nohup could not run")
    decisive = next(ln for ln in death.evidence if ln.number == death.line)
    assert decisive.text[death.span[0] : death.span[1]] == "/opt/venvs/sglang-0.5/bin/python"


def test_gpus_busy_before_the_launch_are_the_root_cause_of_the_oom():
    report = _report(CODEX)
    occupied, oom = report.incidents
    assert (occupied.rule_class, oom.rule_class) == ("gpus_occupied", "oom")
    assert occupied.attempt == oom.attempt == 1
    assert report.verdict == "gpus_occupied"
    assert oom.corrected_command is None and oom.edits == []
    assert "already occupied before attempt 1" in oom.advice[0]
    assert "CUDA_VISIBLE_DEVICES=2,3" in " ".join(occupied.advice)
    busy = [ln.text for ln in occupied.evidence if "MiB /" in ln.text]
    assert len(busy) == 2 and all("61458MiB" in t for t in busy)
    assert [a.outcome for a in report.attempts] == ["failed", "ready"]


def test_gpus_the_launch_does_not_use_are_not_blamed(tmp_path):
    oom = (ROOT / "fixtures/source/oom_other_process.log").read_text("utf-8").split("\n")[85:155]
    session = [
        "$ nvidia-smi",
        *CODEX_TABLE.split("\n"),
        "$ CUDA_VISIBLE_DEVICES=2,3 python3 -m sglang.launch_server --model-path m --tp-size 2",
        *oom,
        "$ ",
    ]
    path = tmp_path / "session.txt"
    path.write_text("\n".join(session) + "\n", "utf-8")
    report = analyze([str(path)])
    assert [i.rule_class for i in report.incidents] == ["oom"]
    busy_elsewhere = analyze([str(_without_visible_devices(path, tmp_path))])
    assert [i.rule_class for i in busy_elsewhere.incidents] == ["gpus_occupied", "oom"]


def _without_visible_devices(path: Path, folder: Path) -> Path:
    other = folder / "on_gpus_0_1.txt"
    other.write_text(path.read_text("utf-8").replace("CUDA_VISIBLE_DEVICES=2,3 ", ""), "utf-8")
    return other


CODEX_TABLE = "\n".join(
    [
        "|   0  NVIDIA H100 80GB HBM3          On  |   00000000:18:00.0 Off |                    0 |",
        "| N/A   42C    P0            412W /  700W |   61458MiB /  81559MiB |     97%      Default |",
        "|   1  NVIDIA H100 80GB HBM3          On  |   00000000:28:00.0 Off |                    0 |",
        "| N/A   42C    P0            412W /  700W |   61458MiB /  81559MiB |     97%      Default |",
        "|   2  NVIDIA H100 80GB HBM3          On  |   00000000:38:00.0 Off |                    0 |",
        "| N/A   34C    P0             71W /  700W |       0MiB /  81559MiB |      0%      Default |",
        "|   3  NVIDIA H100 80GB HBM3          On  |   00000000:48:00.0 Off |                    0 |",
        "| N/A   34C    P0             71W /  700W |       0MiB /  81559MiB |      0%      Default |",
        "|    0   N/A  N/A      4242      C   python                                      61440MiB |",
    ]
)


# --------------------------------------------------------------------------- text and script


def test_terminal_evidence_uses_the_file_lines():
    lines = TERMINAL.read_text("utf-8").split("\n")
    for incident in _report(TERMINAL).incidents:
        for line in incident.evidence:
            assert line.ref is None
            assert line.text in lines[line.number - 1]


def test_a_script_typescript_reads_like_the_paste(tmp_path):
    colour = "\x1b[01;32mdev@cpu-box\x1b[00m:\x1b[01;34m~\x1b[00m$ "
    body = TERMINAL.read_text("utf-8").replace("dev@cpu-box:~$ ", colour)
    typescript = tmp_path / "typescript"
    header = 'Script started on 2026-03-17 13:20:00+00:00 [COMMAND="/bin/bash" TERM="xterm"]\r\n'
    typescript.write_bytes((header + body.replace("\n", "\r\n")).encode())
    assert detect.detect_kind(TextInput(str(typescript), typescript)) == "transcript_text"
    report = analyze([str(typescript)])
    expected = _report(TERMINAL)
    assert [(i.rule, i.line - 1) for i in report.incidents] == [
        (i.rule, i.line) for i in expected.incidents
    ]
    assert report.incidents[0].corrected_command == expected.incidents[0].corrected_command


# --------------------------------------------------------------------------- opencode


def test_the_export_is_streamed_into_the_same_events_as_a_full_parse():
    data = json.loads(EXPORT.read_text("utf-8"))
    whole = [e for m in data["messages"] for e in message_events(m["info"], m["parts"])]
    transcript = read_transcript(TextInput(str(EXPORT), EXPORT), "transcript_opencode")
    streamed = list(transcript.events)
    assert streamed == whole
    assert sum(isinstance(e, ShellCall) for e in streamed) == 6
    assert [e.text for e in streamed if isinstance(e, UserMessage)][-1] == "server crashed"
    assert transcript.lines == EXPORT.read_text("utf-8").count("\n") + 1


def _database_from(storage: Path, path: Path) -> None:
    """opencode.db as opencode's session.sql.ts defines message and part (data without ids)."""
    db = sqlite3.connect(path)
    db.executescript(
        "CREATE TABLE session (id TEXT PRIMARY KEY, project_id TEXT, title TEXT,"
        " time_created INTEGER, time_updated INTEGER);"
        "CREATE TABLE message (id TEXT PRIMARY KEY, session_id TEXT NOT NULL,"
        " time_created INTEGER, time_updated INTEGER, data TEXT NOT NULL);"
        "CREATE TABLE part (id TEXT PRIMARY KEY, message_id TEXT NOT NULL, session_id TEXT NOT NULL,"
        " time_created INTEGER, time_updated INTEGER, data TEXT NOT NULL);"
    )
    for file in sorted((storage / "message").glob("*/*.json")):
        info = json.loads(file.read_text("utf-8"))
        created = info["time"]["created"]
        data = {k: v for k, v in info.items() if k not in ("id", "sessionID")}
        db.execute(
            "INSERT INTO message VALUES (?, ?, ?, ?, ?)",
            (info["id"], info["sessionID"], created, created, json.dumps(data)),
        )
        for part_file in sorted((storage / "part" / info["id"]).glob("*.json")):
            part = json.loads(part_file.read_text("utf-8"))
            rest = {k: v for k, v in part.items() if k not in ("id", "sessionID", "messageID")}
            db.execute(
                "INSERT INTO part VALUES (?, ?, ?, ?, ?, ?)",
                (part["id"], info["id"], info["sessionID"], created, created, json.dumps(rest)),
            )
    db.commit()
    db.close()


def test_the_sqlite_database_reads_like_the_storage_folder(tmp_path):
    database = tmp_path / "opencode.db"
    _database_from(STORAGE, database)
    assert detect.detect_kind(TextInput(str(database), database)) == "transcript_opencode"
    from_db, from_folder = analyze([str(database)]), analyze([str(STORAGE)])
    assert [(i.rule, i.line, i.span, [e.ref for e in i.evidence]) for i in from_db.incidents] == [
        (i.rule, i.line, i.span, [e.ref for e in i.evidence]) for i in from_folder.incidents
    ]


# --------------------------------------------------------------------------- pieces


def test_shell_levels_show_what_bash_c_really_ran():
    level = shell.parse(
        "ssh h 'cd /d && nohup bash -c 'python3 -m sglang.launch_server --tp 8' > /d/x.log 2>&1 &'"
    )
    (problem,) = level.all_problems()
    assert problem.kind == "outside_script" and "ran only `python3`" in problem.detail
    fine = shell.parse(
        "ssh h 'nohup bash -c \"python3 -m sglang.launch_server --tp 8\" > /d/x.log 2>&1 &'"
    )
    assert fine.all_problems() == []


def test_a_script_written_with_a_heredoc_and_run_later_is_an_attempt():
    script = (
        "cat > /tmp/run.sh <<'EOF'\n"
        "python -m sglang.launch_server --model-path m --num-speculative-tokens 4\n"
        "EOF\n"
        "nohup bash /tmp/run.sh > /tmp/run.log 2>&1 &"
    )
    tail = "usage: sglang serve [-h] --model-path MODEL_PATH\nsglang serve: error: unrecognized arguments: --num-speculative-tokens 4"
    calls = [
        ShellCall(script, "", 0, ref="w"),
        ShellCall("tail -n 2 /tmp/run.log", tail, 0, ref="t"),
    ]
    session = build_session(calls, load_catalog().takes_value)
    (attempt,) = session.attempts
    assert attempt.launch.log_path == "/tmp/run.log" and attempt.launch.script == "/tmp/run.sh"
    assert (
        attempt.launch.text
        == "python -m sglang.launch_server --model-path m --num-speculative-tokens 4"
    )
    assert [v.ref for v in attempt.views] == ["t"]


def test_echo_markers_split_one_output_into_its_commands():
    command = (
        "ls -la /d/new.log /d/old.log; echo '---'; pgrep -a python3 | head -5; echo ---; "
        "nvidia-smi | grep MiB"
    )
    output = (
        "ls: cannot access '/d/new.log': No such file or directory\n"
        "-rw-r--r-- 1 root root 80728 Feb 23 18:05 /d/old.log\n---\n"
        "4242 python3 train.py\n---\n"
        "| N/A   23C    P8             33W /  600W |       0MiB /  97887MiB |      0%      Default |"
    )
    launch = ShellCall(
        "nohup python3 -m sglang.launch_server --model-path m > /d/new.log 2>&1 &", "", 0
    )
    session = build_session([launch, ShellCall(command, output, 0)])
    attempt = session.attempts[0]
    (ls,) = attempt.of_kind("ls")
    assert [m[0] for m in ls.data.missing] == ["/d/new.log"]
    (processes,) = attempt.of_kind("processes")
    assert processes.data.conclusive and processes.data.server == []
    (gpus,) = attempt.of_kind("gpus")
    assert [(g.index, g.used_mib, g.total_mib) for g in gpus.data.gpus] == [(0, 0, 97887)]
    assert not gpus.data.indexed


def test_nvidia_smi_csv_and_table_give_the_same_numbers():
    csv = [
        (1, "index, memory.used [MiB], memory.total [MiB]"),
        (2, "0, 61458 MiB, 81559 MiB"),
        (3, "1, 12 MiB, 81559 MiB"),
    ]
    parsed = command_outputs.parse_nvidia_smi(
        ["--query-gpu=index,memory.used,memory.total", "--format=csv"], csv
    )
    table = command_outputs.parse_nvidia_smi([], list(enumerate(CODEX_TABLE.split("\n"), 1)))
    assert [(g.index, g.used_mib) for g in parsed.gpus] == [(0, 61458), (1, 12)]
    assert [(g.index, g.used_mib) for g in table.gpus][:2] == [(0, 61458), (1, 61458)]
    assert [(p.gpu, p.pid, p.used_mib) for p in table.processes] == [(0, 4242, 61440)]


@pytest.mark.parametrize(
    ("output", "exit_code", "looped", "ok"),
    [
        (
            "curl: (7) Failed to connect to localhost port 30000 after 0 ms: Couldn't connect to server",
            7,
            False,
            False,
        ),
        ("", 0, True, False),
        ("UP", 0, True, True),
        ("200", 0, False, True),
        ("\n\n(Command timed out after 600000 ms)", None, True, False),
    ],
)
def test_health_polls(output, exit_code, looped, ok):
    lines = list(enumerate(output.split("\n"), 1))
    assert command_outputs.parse_health("curl ...", looped, exit_code, lines).ok is ok


def test_flag_diff_uses_canonical_names():
    catalog = load_catalog()
    before = parse_launch_command(
        "python -m sglang.launch_server --tp 8 --speculative-num-steps 3", catalog.takes_value
    )
    after = parse_launch_command(
        "python3 -m sglang.launch_server --tp-size 8 --speculative-num-steps 2 --port 1",
        catalog.takes_value,
    )
    changes = [(c.flag, c.before, c.after) for c in flag_diff(before, after, catalog.canonical)]
    assert changes == [
        ("entry", "python -m sglang.launch_server", "python3 -m sglang.launch_server"),
        ("--speculative-num-steps", "3", "2"),
        ("--port", None, "1"),
    ]


# --------------------------------------------------------------------------- guarantees


def test_secrets_in_a_transcript_launch_are_redacted(tmp_path):
    text = (
        "$ HF_TOKEN=hf_abcdefghijklmnopqrstuvwx python -m sglang.launch_server --model-path m --num-speculative-tokens 4\n"
        "usage: sglang serve [-h] --model-path MODEL_PATH\n"
        "sglang serve: error: unrecognized arguments: --num-speculative-tokens 4\n"
        "$ ls\n"
    )
    path = tmp_path / "paste.txt"
    path.write_text(text, "utf-8")
    rendered = render_json(analyze([str(path)])) + render_plain(analyze([str(path)]))
    assert "hf_abcdefghijklmnopqrstuvwx" not in rendered
    assert "HF_TOKEN=***" in json.loads(render_json(analyze([str(path)])))["attempts"][0]["command"]


@pytest.mark.parametrize(
    "content",
    [
        b'{\n  "info": {\n    "id": "ses_x"\n  },\n  "messages": [\n    {"info": {"id": "m", "role": "user"}, "parts": [',
        b'{"type": "user", "uuid": "u", "message": {"role": "user", "content": "crashed"}}\n{not json\n\x00\xff\n',
        b'{"timestamp": "t", "type": "session_meta", "payload": {}}\n{"timestamp": "t", "type": "response_item", "payload": 3}\n',
    ],
    ids=["truncated-export", "garbage-jsonl", "odd-codex"],
)
def test_broken_transcripts_give_a_report_not_a_traceback(tmp_path, content):
    path = tmp_path / "broken.json"
    path.write_bytes(content)
    result = subprocess.run(
        [sys.executable, "-m", "analyzer", str(path), "-f", "json"],
        capture_output=True,
        cwd=ROOT,
        timeout=120,
    )
    assert result.returncode in (0, 1), result.stderr.decode()
    assert "Traceback" not in result.stderr.decode()
    json.loads(result.stdout)


def test_same_transcript_same_bytes():
    for path in (CLAUDE, EXPORT, STORAGE, CODEX, TERMINAL):
        assert render_json(_report(path)) == render_json(_report(path))


def test_reports_of_a_multi_attempt_session(snapshot):
    assert render_plain(_report(CLAUDE)) == snapshot
    assert render_json(_report(EXPORT)) == snapshot


def test_a_background_shell_read_back_with_bash_output_is_the_attempts_log(tmp_path):
    launch = "python -m sglang.launch_server --model-path m --num-speculative-tokens 4"
    records = [
        {"type": "assistant", "uuid": "a1", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_A", "name": "Bash",
             "input": {"command": launch, "run_in_background": True}}]}},
        {"type": "user", "uuid": "u1", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_A", "is_error": False,
             "content": "Command running in background with ID: bash_1"}]}},
        {"type": "assistant", "uuid": "a2", "message": {"role": "assistant", "content": [
            {"type": "tool_use", "id": "toolu_B", "name": "BashOutput", "input": {"bash_id": "bash_1"}}]}},
        {"type": "user", "uuid": "u2", "message": {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_B", "is_error": False, "content": (
                "<status>failed</status>\n\n<exit_code>2</exit_code>\n\n<stdout>\n"
                "usage: sglang serve [-h] --model-path MODEL_PATH\n"
                "sglang serve: error: unrecognized arguments: --num-speculative-tokens 4\n</stdout>")}]}},
    ]  # fmt: skip
    path = tmp_path / "session.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records), "utf-8")
    (incident,) = analyze([str(path)]).incidents
    assert (incident.rule_class, incident.attempt, incident.line) == ("argparse_unrecognized", 1, 2)
    assert incident.evidence[-1].ref == "toolu_B"
    assert incident.corrected_command == launch.replace(
        "--num-speculative-tokens", "--speculative-num-draft-tokens"
    )


def test_a_transcript_without_a_launch_says_so(tmp_path):
    path = tmp_path / "session.txt"
    path.write_text("$ ls\nrun.log\n$ nvidia-smi -L\nGPU 0: NVIDIA H100\n", "utf-8")
    report = analyze([str(path)])
    assert report.incidents == [] and report.inputs[0].kind == "transcript_text"
    assert "no SGLang launch found in this transcript" in report.inputs[0].notes

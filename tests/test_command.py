"""Tests for the launch-command model: parsing, byte-exact round trip, minimal safe edits."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.core.model import Edit
from analyzer.sglang.launch_command import (
    Argument,
    LaunchCommand,
    find_launch_command,
    parse_launch_command,
)

KIMI = (
    "python -m sglang.launch_server --model-path /models/Kimi-K2.5 --tp-size 8 "
    "--speculative-algorithm EAGLE3 --speculative-draft-model-path /data/eagle3/ckpt "
    "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4 "
    "--mem-fraction-static 0.85 --port 30000"
)
MULTILINE = (
    "CUDA_VISIBLE_DEVICES=0,1,2,3 python3 -m sglang.launch_server \\\n"
    "    --model-path /models/Qwen3-235B-A22B \\\n"
    "    --tp 4 \\\n"
    "    --enable-dp-attention \\\n"
    "    --chunked-prefill-size=8192 \\\n"
    "    --port 30000 \\\n"
    "    > /var/log/sglang.log 2>&1 &\n"
)
BASH_C = (
    "nohup bash -c 'source /opt/venv/bin/activate && python -m sglang.launch_server "
    "--model-path /models/DeepSeek-V3 --tp 8 --trust-remote-code ' > server.log 2>&1 &"
)
SSH = (
    'ssh -p 22 ubuntu@10.0.0.1 "cd /srv/sglang && nohup python -m sglang.launch_server '
    "--model-path /models/Llama-3.1-70B --tp 8 --nnodes 2 --node-rank 0 "
    '--dist-init-addr 10.0.0.1:5000 > node0.log 2>&1 &"'
)
EVIL = "$(touch /tmp/pwned); echo"

BOOLEANS = {"--trust-remote-code", "--enable-dp-attention", "--disable-cuda-graph"}


def parse(text: str, takes_value=None) -> LaunchCommand:
    cmd = parse_launch_command(text, takes_value)
    assert cmd is not None, text
    return cmd


def edited(text: str, *edits: Edit, canonical=None) -> str:
    return parse(text).apply(list(edits), canonical=canonical).render()


def pairs(cmd: LaunchCommand) -> list[tuple[str, str | None]]:
    return [(a.flag, a.value) for a in cmd.arguments]


def argv_after_entry(tokens: list[str]) -> list[str]:
    """The tokens after `-m sglang.launch_server` in a shlex-split command."""
    at = tokens.index("sglang.launch_server")
    return tokens[at + 1 :]


def bash_words(words: str, cwd: Path | None = None) -> list[str]:
    """How bash splits a string of plain words (no operators).

    shlex.split is not POSIX inside double quotes: it keeps the backslash of `\\$` and `\\``,
    so double-quoted levels are checked with the real shell (an escape that failed would run
    the injected command here, which the callers also check).
    """
    done = subprocess.run(
        ["bash", "-c", "printf '%s\\0' " + words],
        capture_output=True,
        text=True,
        check=True,
        cwd=cwd,
    )
    return done.stdout.split("\0")[:-1]


def inner_script(text: str) -> str:
    """The string handed to `bash -c` / `sh -c` / ssh (the word after -c or the host)."""
    tokens = shlex.split(text)
    for i, token in enumerate(tokens):
        if token in ("-c", "-lc"):
            return tokens[i + 1]
    return tokens[-1]


# --------------------------------------------------------------------------- round trip

ROUND_TRIP = [
    KIMI,
    MULTILINE,
    BASH_C,
    SSH,
    "CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO python3 -m sglang.launch_server --tp 2",
    "env NCCL_DEBUG=INFO HF_HUB_OFFLINE=1 python -m sglang.launch_server --model-path /m",
    "nohup python -m sglang.launch_server --model-path /m --port 30000 > run.log 2>&1 &",
    "bash -c 'python -m sglang.launch_server --model-path /m --tp 8'",
    'sh -c "python -m sglang.launch_server --model-path /m --tp 8"',
    "nohup bash -c 'python -m sglang.launch_server --model-path /m ' > log 2>&1 &",
    "ssh gpu-node-1 'python -m sglang.launch_server --model-path /m --tp 8'",
    "ssh host 'source venv/bin/activate; python -m sglang.launch_server --tp 8'",
    "/opt/venv/bin/python -m sglang.launch_server --model-path /m",
    "sglang serve --model-path /m --tp 8",
    "exec python3 -m sglang.launch_server --model-path /m",
    "timeout 600 python3 -m sglang.launch_server --model-path /m",
    "numactl --cpunodebind=0 --membind=0 python3 -m sglang.launch_server --model-path /m",
    "python -m sglang.launch_server --model-path /m >> server.log",
    "python -m sglang.launch_server --model-path /m 2>&1 | tee server.log",
    "python -m sglang.launch_server --model-path /m |& tee -a server.log",
    "python -m sglang.launch_server --model-path   /m\t--tp  8   # comment",
    'python -m sglang.launch_server --json-model-override-args \'{"rope_scaling": {"factor": 4}}\'',
    "python -m sglang.launch_server --model-path '/models/with space' --x -1 --y=-0.5",
    "python -m sglang.launch_server \\\r\n  --tp 8 \\\r\n  --port 1\r\n",
    "export A=1\ncd /srv\npython -m sglang.launch_server --model-path /m\n",
    "bash -c $'python -m sglang.launch_server --json-model-override-args \\'{\"a\": 1}\\''",
    "python -m sglang.launch_server --model-path 'unterminated",
]


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_round_trip_is_byte_exact(text: str) -> None:
    cmd = parse(text)
    assert cmd.original == text
    assert cmd.render() == text


@pytest.mark.parametrize("text", ROUND_TRIP)
def test_apply_without_edits_is_identity(text: str) -> None:
    again = parse(text).apply([])
    assert again.render() == text
    assert again.original == text


# --------------------------------------------------------------------------- parsing shapes


def test_plain_kimi_command() -> None:
    cmd = parse(KIMI)
    assert cmd.entry == "python -m sglang.launch_server"
    assert cmd.flags()[:3] == ["--model-path", "--tp-size", "--speculative-algorithm"]
    assert cmd.get("--tp-size") == "8"
    assert cmd.get("--speculative-draft-model-path") == "/data/eagle3/ckpt"
    assert cmd.get("--mem-fraction-static") == "0.85"
    assert cmd.has("--port") and not cmd.has("--tp")
    assert cmd.get("--tp") is None
    assert cmd.env == {} and cmd.wrappers == []
    assert cmd.log_path is None and cmd.background is False
    assert all(isinstance(a, Argument) and not a.joined for a in cmd.arguments)


def test_env_prefixes_in_order() -> None:
    cmd = parse("CUDA_VISIBLE_DEVICES=0,1 NCCL_DEBUG=INFO python3 -m sglang.launch_server --tp 2")
    assert list(cmd.env.items()) == [("CUDA_VISIBLE_DEVICES", "0,1"), ("NCCL_DEBUG", "INFO")]
    assert cmd.entry == "python3 -m sglang.launch_server"
    assert cmd.wrappers == []


def test_env_command() -> None:
    cmd = parse("env A=1 B='x y' python -m sglang.launch_server --tp 2")
    assert cmd.env == {"A": "1", "B": "x y"}
    assert cmd.wrappers == ["env"]
    assert pairs(cmd) == [("--tp", "2")]


def test_nohup_redirect_background() -> None:
    cmd = parse("nohup python -m sglang.launch_server --model-path /m > run.log 2>&1 &")
    assert cmd.wrappers == ["nohup"]
    assert cmd.log_path == "run.log"
    assert cmd.background is True
    assert pairs(cmd) == [("--model-path", "/m")]


def test_bash_c_parsed_recursively() -> None:
    cmd = parse(BASH_C, takes_value=lambda f: False if f in BOOLEANS else None)
    assert cmd.wrappers == ["nohup", "bash -c"]
    assert cmd.entry == "python -m sglang.launch_server"
    assert pairs(cmd) == [
        ("--model-path", "/models/DeepSeek-V3"),
        ("--tp", "8"),
        ("--trust-remote-code", None),
    ]
    assert cmd.log_path == "server.log"
    assert cmd.background is True


def test_sh_c_double_quoted() -> None:
    text = (
        'sh -c "python -m sglang.launch_server --model-path /m '
        '--json-model-override-args \'{\\"a\\": 1}\'"'
    )
    cmd = parse(text)
    assert cmd.wrappers == ["sh -c"]
    assert cmd.get("--json-model-override-args") == '{"a": 1}'
    assert json.loads(cmd.get("--json-model-override-args") or "") == {"a": 1}


def test_bash_lc_and_login_options() -> None:
    cmd = parse("bash -l -c 'python -m sglang.launch_server --tp 2'")
    assert cmd.wrappers == ["bash -c"] and cmd.get("--tp") == "2"
    cmd = parse("/bin/bash -lc 'exec python -m sglang.launch_server --tp 4'")
    assert cmd.wrappers == ["bash -c", "exec"] and cmd.get("--tp") == "4"


def test_ssh_with_cd_and_nohup() -> None:
    cmd = parse(SSH)
    assert cmd.wrappers == ["ssh", "nohup"]
    assert cmd.get("--nnodes") == "2"
    assert cmd.get("--node-rank") == "0"
    assert cmd.get("--dist-init-addr") == "10.0.0.1:5000"
    assert cmd.log_path == "node0.log"
    assert cmd.background is True


@pytest.mark.parametrize(
    "text",
    [
        "ssh host 'source venv/bin/activate && python -m sglang.launch_server --tp 8'",
        "ssh host 'source venv/bin/activate; python -m sglang.launch_server --tp 8'",
        "ssh -i ~/.ssh/id -o StrictHostKeyChecking=no host "
        "'cd /x; python -m sglang.launch_server --tp 8'",
    ],
)
def test_ssh_launch_after_preamble(text: str) -> None:
    cmd = parse(text)
    assert cmd.wrappers == ["ssh"]
    assert cmd.get("--tp") == "8"
    assert cmd.background is False


def test_ssh_unquoted_remote_words() -> None:
    cmd = parse("ssh host python -m sglang.launch_server --tp 8 --port 30000")
    assert cmd.wrappers == ["ssh"]
    assert pairs(cmd) == [("--tp", "8"), ("--port", "30000")]


def test_ssh_bash_c_nested_twice() -> None:
    cmd = parse("ssh host \"bash -c 'python -m sglang.launch_server --tp 8'\"")
    assert cmd.wrappers == ["ssh", "bash -c"]
    assert cmd.get("--tp") == "8"


@pytest.mark.parametrize(
    ("text", "entry", "wrappers"),
    [
        ("python -m sglang.launch_server --tp 1", "python -m sglang.launch_server", []),
        ("python3 -m sglang.launch_server --tp 1", "python3 -m sglang.launch_server", []),
        ("python3.11 -m sglang.launch_server --tp 1", "python3.11 -m sglang.launch_server", []),
        (
            "/path/to/venv/bin/python -m sglang.launch_server --tp 1",
            "/path/to/venv/bin/python -m sglang.launch_server",
            [],
        ),
        ("python -u -m sglang.launch_server --tp 1", "python -u -m sglang.launch_server", []),
        ("sglang serve --tp 1", "sglang serve", []),
        ("exec python -m sglang.launch_server --tp 1", "python -m sglang.launch_server", ["exec"]),
        (
            "timeout 600 python3 -m sglang.launch_server --tp 1",
            "python3 -m sglang.launch_server",
            ["timeout"],
        ),
        (
            "numactl --cpunodebind=0 --membind=0 python -m sglang.launch_server --tp 1",
            "python -m sglang.launch_server",
            ["numactl"],
        ),
        (
            "numactl -N 0 -m 0 python -m sglang.launch_server --tp 1",
            "python -m sglang.launch_server",
            ["numactl"],
        ),
        (
            "docker run --gpus all --ipc=host lmsysorg/sglang:latest python3 -m "
            "sglang.launch_server --tp 1",
            "python3 -m sglang.launch_server",
            ["docker"],
        ),
    ],
)
def test_entry_points(text: str, entry: str, wrappers: list[str]) -> None:
    cmd = parse(text)
    assert cmd.entry == entry
    assert cmd.wrappers == wrappers
    assert pairs(cmd) == [("--tp", "1")]


def test_multiline_continuations() -> None:
    cmd = parse(MULTILINE)
    assert pairs(cmd) == [
        ("--model-path", "/models/Qwen3-235B-A22B"),
        ("--tp", "4"),
        ("--enable-dp-attention", None),
        ("--chunked-prefill-size", "8192"),
        ("--port", "30000"),
    ]
    assert cmd.arguments[3].joined is True
    assert cmd.env == {"CUDA_VISIBLE_DEVICES": "0,1,2,3"}
    assert cmd.log_path == "/var/log/sglang.log"
    assert cmd.background is True


def test_crlf_continuations() -> None:
    cmd = parse("python -m sglang.launch_server \\\r\n  --tp 8 \\\r\n  --port 1\r\n")
    assert pairs(cmd) == [("--tp", "8"), ("--port", "1")]


def test_joined_and_spaced_values_and_repeats() -> None:
    cmd = parse(
        "python -m sglang.launch_server --tp=2 --port 1 --tp 4 --lora-paths a --lora-paths b"
    )
    assert cmd.arguments[0] == Argument("--tp", "2", True)
    assert cmd.arguments[2] == Argument("--tp", "4", False)
    assert cmd.get("--tp") == "4"
    assert cmd.get("--lora-paths") == "b"
    assert cmd.flags() == ["--tp", "--port", "--tp", "--lora-paths", "--lora-paths"]


def test_negative_numbers_are_values() -> None:
    cmd = parse("python -m sglang.launch_server --random-seed -1 --x -0.5 --y=-3 --z -1e-3")
    assert pairs(cmd) == [("--random-seed", "-1"), ("--x", "-0.5"), ("--y", "-3"), ("--z", "-1e-3")]


def test_quoted_values_with_spaces_and_json() -> None:
    cmd = parse(
        "python -m sglang.launch_server --model-path '/models/my model' "
        '--chat-template "a b" --json-model-override-args \'{"a": 1, "b": [1, 2]}\''
    )
    assert cmd.get("--model-path") == "/models/my model"
    assert cmd.get("--chat-template") == "a b"
    assert json.loads(cmd.get("--json-model-override-args") or "") == {"a": 1, "b": [1, 2]}


def test_joined_quoted_json() -> None:
    cmd = parse("python -m sglang.launch_server --json-model-override-args='{\"a\": 1}'")
    assert cmd.arguments == [Argument("--json-model-override-args", '{"a": 1}', True)]


def test_boolean_flags_heuristic() -> None:
    cmd = parse(
        "python -m sglang.launch_server --enable-torch-compile --disable-radix-cache --tp 2"
    )
    assert pairs(cmd) == [
        ("--enable-torch-compile", None),
        ("--disable-radix-cache", None),
        ("--tp", "2"),
    ]


def test_trailing_boolean_flag() -> None:
    cmd = parse("python -m sglang.launch_server --tp 2 --trust-remote-code")
    assert cmd.arguments[-1] == Argument("--trust-remote-code", None, False)


def test_redirects_are_not_arguments() -> None:
    cmd = parse("python -m sglang.launch_server --tp 2 --trust-remote-code > log 2>&1")
    assert pairs(cmd) == [("--tp", "2"), ("--trust-remote-code", None)]
    assert cmd.log_path == "log"


@pytest.mark.parametrize(
    ("suffix", "log_path", "background"),
    [
        ("> run.log 2>&1", "run.log", False),
        (">> run.log", "run.log", False),
        ("> run.log 2>&1 &", "run.log", True),
        ("&> run.log", "run.log", False),
        ("1> out.log 2> err.log", "out.log", False),
        ("2> err.log", "err.log", False),
        ("2>&1 | tee run.log", "run.log", False),
        ("2>&1 | tee -a run.log", "run.log", False),
        ("|& tee -a run.log", "run.log", False),
        ("2>&1 | tee run.log &", "run.log", True),
        ("&", None, True),
        ("", None, False),
    ],
)
def test_redirections(suffix: str, log_path: str | None, background: bool) -> None:
    cmd = parse(f"python -m sglang.launch_server --model-path /m {suffix}")
    assert cmd.log_path == log_path
    assert cmd.background is background
    assert pairs(cmd) == [("--model-path", "/m")]


def test_innermost_redirect_wins() -> None:
    cmd = parse(
        "nohup bash -c 'python -m sglang.launch_server --tp 1 > inner.log 2>&1' > outer.log &"
    )
    assert cmd.log_path == "inner.log"
    assert cmd.background is True


def test_launch_among_other_commands() -> None:
    cmd = parse(
        "export A=1\ncd /srv && source .venv/bin/activate\npython -m sglang.launch_server --tp 8\n"
    )
    assert cmd.get("--tp") == "8"
    assert cmd.env == {}


def test_positionals_are_kept_but_not_arguments() -> None:
    cmd = parse("sglang serve /models/x --tp 2", takes_value=lambda f: True)
    assert cmd.positionals == ["/models/x"]
    assert pairs(cmd) == [("--tp", "2")]


@pytest.mark.parametrize(
    "text",
    [
        "grep sglang.launch_server log",
        "pip install sglang",
        "pip install 'sglang[all]'",
        "pgrep -a python3",
        "python -m pip install sglang",
        "echo python -m sglang.launch_server --tp 8",
        "ps aux | grep 'python -m sglang.launch_server'",
        "kill $(pgrep -f sglang.launch_server)",
        "python -m sglang.bench_serving --port 30000",
        "python3 -m sglang.launch_server.py",
        "sudo echo python -m sglang.launch_server",
        "bash -c 'echo hi'",
        "",
    ],
)
def test_not_a_launch(text: str) -> None:
    assert parse_launch_command(text) is None


# --------------------------------------------------------------------------- takes_value


def test_takes_value_false_keeps_boolean_before_positional() -> None:
    text = "python -m sglang.launch_server --trust-remote-code /models/x --tp 2"
    assert parse(text).get("--trust-remote-code") == "/models/x"  # heuristic consumes
    cmd = parse(text, takes_value=lambda f: False if f in BOOLEANS else None)
    assert cmd.arguments[0] == Argument("--trust-remote-code", None, False)
    assert cmd.positionals == ["/models/x"]
    assert cmd.get("--tp") == "2"


def test_takes_value_false_before_another_flag() -> None:
    cmd = parse(
        "python -m sglang.launch_server --disable-cuda-graph --tp 2",
        takes_value=lambda f: False if f in BOOLEANS else None,
    )
    assert pairs(cmd) == [("--disable-cuda-graph", None), ("--tp", "2")]


def test_a_following_option_is_never_a_value_as_in_argparse() -> None:
    # argparse says "expected one argument" here; the model must keep both flags.
    cmd = parse("python -m sglang.launch_server --chat-template --weird --tp 2", lambda f: True)
    assert pairs(cmd) == [("--chat-template", None), ("--weird", None), ("--tp", "2")]


def test_rename_of_a_positional_names_it() -> None:
    cmd = parse("python -m sglang.launch_server /models/x --device cpu")
    edited = cmd.apply([Edit("rename", "/models/x", to="--model-path")])
    assert edited.render() == "python -m sglang.launch_server --model-path /models/x --device cpu"


def test_takes_value_none_heuristic() -> None:
    cmd = parse("python -m sglang.launch_server --a --b -1 --c x", lambda f: None)
    assert pairs(cmd) == [("--a", None), ("--b", "-1"), ("--c", "x")]


def test_takes_value_receives_typed_flags() -> None:
    seen: list[str] = []

    def takes_value(flag: str) -> bool | None:
        seen.append(flag)
        return None

    parse("python -m sglang.launch_server --tp 2 --enable-x --port=1", takes_value)
    assert seen == ["--tp", "--enable-x"]  # joined flags never ask


def test_takes_value_kept_across_apply() -> None:
    cmd = parse(
        "python -m sglang.launch_server --tp 2",
        takes_value=lambda f: False if f in BOOLEANS else None,
    )
    new = cmd.apply([Edit("add", "--trust-remote-code"), Edit("add", "--model-path", value="/m")])
    assert pairs(new) == [("--tp", "2"), ("--trust-remote-code", None), ("--model-path", "/m")]


# --------------------------------------------------------------------------- rename


def test_rename_keeps_value_and_position() -> None:
    out = edited(KIMI, Edit("rename", "--speculative-num-draft-tokens", to="--num-draft"))
    assert out == KIMI.replace("--speculative-num-draft-tokens 4", "--num-draft 4")


def test_rename_joined_keeps_style() -> None:
    out = edited(MULTILINE, Edit("rename", "--chunked-prefill-size", to="--chunk-size"))
    assert out == MULTILINE.replace("--chunked-prefill-size=8192", "--chunk-size=8192")


def test_rename_with_new_value() -> None:
    out = edited(KIMI, Edit("rename", "--tp-size", to="--tp", value="4"))
    assert out == KIMI.replace("--tp-size 8", "--tp 4")
    out = edited(MULTILINE, Edit("rename", "--chunked-prefill-size", to="--x", value="a b"))
    assert "--x='a b' \\\n" in out


def test_rename_bare_flag_with_value() -> None:
    text = "python -m sglang.launch_server --enable-x --tp 2"
    out = edited(text, Edit("rename", "--enable-x", to="--mode", value="fast"))
    assert out == "python -m sglang.launch_server --mode fast --tp 2"


def test_rename_every_occurrence() -> None:
    text = "python -m sglang.launch_server --tp 2 --port 1 --tp=4"
    out = edited(text, Edit("rename", "--tp", to="--tp-size"))
    assert out == "python -m sglang.launch_server --tp-size 2 --port 1 --tp-size=4"


def test_rename_absent_flag_is_noop() -> None:
    assert edited(KIMI, Edit("rename", "--nope", to="--other")) == KIMI


def test_rename_without_target_raises() -> None:
    with pytest.raises(ValueError):
        parse(KIMI).apply([Edit("rename", "--tp-size")])


def test_canonical_matching() -> None:
    aliases = {"--tp": "--tensor-parallel-size", "--tp-size": "--tensor-parallel-size"}

    def canonical(flag: str) -> str | None:
        return aliases.get(flag, flag if flag.startswith("--") else None)

    edit = Edit("rename", "--tensor-parallel-size", to="--tp")
    assert edited(KIMI, edit) == KIMI  # typed flag differs: no match without canonical
    assert edited(KIMI, edit, canonical=canonical) == KIMI.replace("--tp-size 8", "--tp 8")
    out = edited(KIMI, Edit("set", "--tensor-parallel-size", value="4"), canonical=canonical)
    assert out == KIMI.replace("--tp-size 8", "--tp-size 4")
    out = edited(KIMI, Edit("remove", "--tensor-parallel-size"), canonical=canonical)
    assert out == KIMI.replace(" --tp-size 8", "")


def test_typed_flag_matches_even_if_canonical_differs() -> None:
    out = edited(KIMI, Edit("remove", "--tp-size"), canonical=lambda f: None)
    assert "--tp-size" not in out


# --------------------------------------------------------------------------- set


def test_set_in_place() -> None:
    out = edited(KIMI, Edit("set", "--mem-fraction-static", value="0.8"))
    assert out == KIMI.replace("0.85", "0.8")


def test_set_joined_keeps_style() -> None:
    out = edited(MULTILINE, Edit("set", "--chunked-prefill-size", value="4096"))
    assert out == MULTILINE.replace("=8192", "=4096")


def test_set_drops_earlier_duplicates() -> None:
    text = "python -m sglang.launch_server --tp 2 --port 1 --tp=4 --host 0.0.0.0"
    out = edited(text, Edit("set", "--tp", value="8"))
    assert out == "python -m sglang.launch_server --port 1 --tp=8 --host 0.0.0.0"


def test_set_absent_adds() -> None:
    out = edited(KIMI, Edit("set", "--cuda-graph-max-bs", value="64"))
    assert out == KIMI + " --cuda-graph-max-bs 64"


def test_set_bare_flag_gets_value_and_value_to_bare() -> None:
    text = "python -m sglang.launch_server --enable-x --tp 2"
    assert edited(text, Edit("set", "--enable-x", value="1")) == (
        "python -m sglang.launch_server --enable-x 1 --tp 2"
    )
    assert edited(text, Edit("set", "--tp")) == "python -m sglang.launch_server --enable-x --tp"
    joined = "python -m sglang.launch_server --tp=2 --port 1"
    assert edited(joined, Edit("set", "--tp")) == "python -m sglang.launch_server --tp --port 1"


def test_set_quotes_values() -> None:
    out = edited(KIMI, Edit("set", "--model-path", value="/models/my model"))
    assert "--model-path '/models/my model' --tp-size 8" in out
    assert parse(out).get("--model-path") == "/models/my model"


def test_set_json_value() -> None:
    value = '{"rope_scaling": {"type": "yarn", "factor": 4.0}}'
    out = edited(KIMI, Edit("set", "--json-model-override-args", value=value))
    assert out.endswith(f" --json-model-override-args '{value}'")
    assert argv_after_entry(shlex.split(out))[-2:] == ["--json-model-override-args", value]


# --------------------------------------------------------------------------- add


def test_add_appends_after_last_argument() -> None:
    out = edited(KIMI, Edit("add", "--disable-cuda-graph"))
    assert out == KIMI + " --disable-cuda-graph"
    out = edited(KIMI, Edit("add", "--cuda-graph-max-bs", value="32"))
    assert out == KIMI + " --cuda-graph-max-bs 32"


def test_add_before_redirections_and_background() -> None:
    text = "nohup python -m sglang.launch_server --model-path /m > run.log 2>&1 &"
    out = edited(text, Edit("add", "--tp", value="2"))
    assert out == "nohup python -m sglang.launch_server --model-path /m --tp 2 > run.log 2>&1 &"


def test_add_before_pipe_to_tee() -> None:
    text = "python -m sglang.launch_server --model-path /m 2>&1 | tee -a run.log"
    out = edited(text, Edit("add", "--tp", value="2"))
    assert out == "python -m sglang.launch_server --model-path /m --tp 2 2>&1 | tee -a run.log"


def test_add_follows_multiline_layout() -> None:
    out = edited(MULTILINE, Edit("add", "--mem-fraction-static", value="0.8"))
    assert out == MULTILINE.replace(
        "--port 30000 \\\n", "--port 30000 \\\n    --mem-fraction-static 0.8 \\\n"
    )
    assert parse(out).get("--mem-fraction-static") == "0.8"


def test_add_inside_bash_c_before_closing_quote() -> None:
    out = edited(BASH_C, Edit("add", "--mem-fraction-static", value="0.8"))
    assert out == BASH_C.replace(
        "--trust-remote-code '", "--trust-remote-code --mem-fraction-static 0.8 '"
    )


def test_add_inside_sh_c_double_quotes() -> None:
    text = 'sh -c "python -m sglang.launch_server --model-path /m"'
    out = edited(text, Edit("add", "--chat-template", value="a b"))
    assert out == "sh -c \"python -m sglang.launch_server --model-path /m --chat-template 'a b'\""


def test_add_inside_ssh() -> None:
    out = edited(SSH, Edit("add", "--disable-cuda-graph"))
    assert out == SSH.replace("10.0.0.1:5000 >", "10.0.0.1:5000 --disable-cuda-graph >")


# --------------------------------------------------------------------------- remove


def test_remove_with_value() -> None:
    out = edited(KIMI, Edit("remove", "--speculative-eagle-topk"))
    assert out == KIMI.replace(" --speculative-eagle-topk 1", "")


def test_remove_every_occurrence() -> None:
    text = "python -m sglang.launch_server --tp 2 --port 1 --tp=4 --enable-x"
    assert (
        edited(text, Edit("remove", "--tp")) == "python -m sglang.launch_server --port 1 --enable-x"
    )


def test_remove_bare_and_first_and_last() -> None:
    text = "python -m sglang.launch_server --enable-x --tp 2 --trust-remote-code"
    assert edited(text, Edit("remove", "--enable-x")) == (
        "python -m sglang.launch_server --tp 2 --trust-remote-code"
    )
    assert edited(text, Edit("remove", "--trust-remote-code")) == (
        "python -m sglang.launch_server --enable-x --tp 2"
    )


def test_remove_in_multiline_keeps_layout() -> None:
    out = edited(MULTILINE, Edit("remove", "--enable-dp-attention"))
    assert out == MULTILINE.replace("    --enable-dp-attention \\\n", "")
    out = edited(MULTILINE, Edit("remove", "--model-path"))
    assert out == MULTILINE.replace("    --model-path /models/Qwen3-235B-A22B \\\n", "")


def test_remove_inside_bash_c() -> None:
    out = edited(BASH_C, Edit("remove", "--tp"))
    assert out == BASH_C.replace(" --tp 8", "")


def test_remove_absent_is_noop() -> None:
    assert edited(KIMI, Edit("remove", "--nope")) == KIMI


def test_unknown_op_raises() -> None:
    with pytest.raises(ValueError):
        parse(KIMI).apply([Edit("explode", "--tp-size")])


# --------------------------------------------------------------------------- apply semantics


def test_apply_returns_new_model_and_keeps_original() -> None:
    cmd = parse(KIMI)
    new = cmd.apply(
        [Edit("set", "--port", value="30001"), Edit("remove", "--speculative-eagle-topk")]
    )
    assert cmd.render() == KIMI and cmd.get("--port") == "30000"
    assert new.original == KIMI
    assert new.get("--port") == "30001"
    assert not new.has("--speculative-eagle-topk")
    assert new.render() == KIMI.replace("30000", "30001").replace(" --speculative-eagle-topk 1", "")


def test_chained_apply() -> None:
    cmd = parse(KIMI)
    one = cmd.apply([Edit("set", "--port", value="1")])
    two = one.apply([Edit("set", "--port", value="2")])
    assert two.render() == KIMI.replace("30000", "2")
    assert two.original == KIMI


def test_many_edits_touch_only_their_arguments() -> None:
    edits = [
        Edit("rename", "--tp", to="--tp-size"),
        Edit("set", "--port", value="30001"),
        Edit("remove", "--enable-dp-attention"),
        Edit("add", "--disable-cuda-graph"),
    ]
    out = edited(MULTILINE, *edits)
    assert out == (
        "CUDA_VISIBLE_DEVICES=0,1,2,3 python3 -m sglang.launch_server \\\n"
        "    --model-path /models/Qwen3-235B-A22B \\\n"
        "    --tp-size 4 \\\n"
        "    --chunked-prefill-size=8192 \\\n"
        "    --port 30001 \\\n"
        "    --disable-cuda-graph \\\n"
        "    > /var/log/sglang.log 2>&1 &\n"
    )


def test_render_refuses_in_place_mutation() -> None:
    cmd = parse(KIMI)
    cmd.arguments[0].value = "/elsewhere"
    with pytest.raises(ValueError):
        cmd.render()


def test_bash_c_unchanged_parts_are_byte_identical() -> None:
    out = edited(BASH_C, Edit("set", "--tp", value="4"))
    assert out == BASH_C.replace("--tp 8", "--tp 4")


def test_ssh_double_quotes_edit() -> None:
    out = edited(SSH, Edit("set", "--node-rank", value="1"), Edit("set", "--tp", value="4"))
    assert out == SSH.replace("--node-rank 0", "--node-rank 1").replace("--tp 8", "--tp 4")


# --------------------------------------------------------------------------- injection


def test_injection_inert_at_top_level() -> None:
    out = edited(KIMI, Edit("add", "--chat-template", value=EVIL))
    tokens = shlex.split(out)
    assert tokens[-2:] == ["--chat-template", EVIL]
    assert parse(out).get("--chat-template") == EVIL


@pytest.mark.parametrize("value", [EVIL, "a;b", "it's", 'say "hi" `id` $HOME \\', "x\ny", ""])
def test_set_hostile_values_tokenize_as_one_argument(value: str) -> None:
    out = edited(KIMI, Edit("set", "--port", value=value))
    tokens = argv_after_entry(shlex.split(out))
    assert tokens[tokens.index("--port") + 1] == value
    assert len(tokens) == len(argv_after_entry(shlex.split(KIMI)))


@pytest.mark.parametrize("value", [EVIL, "it's", "a'b\"c", 'say "hi" `id` $HOME'])
def test_injection_inert_inside_bash_c(value: str) -> None:
    out = edited(
        BASH_C, Edit("add", "--chat-template", value=value), Edit("set", "--tp", value=value)
    )
    outer = shlex.split(out)
    assert outer[:2] == ["nohup", "bash"] and outer[4:] == [">", "server.log", "2>&1", "&"]
    script = inner_script(out)
    inner = argv_after_entry(shlex.split(script))
    assert inner == ["--model-path", "/models/DeepSeek-V3", "--tp", value, "--trust-remote-code",
                     "--chat-template", value]  # fmt: skip
    cmd = parse(out, takes_value=lambda f: False if f in BOOLEANS else None)
    assert cmd.get("--chat-template") == value and cmd.get("--tp") == value


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
@pytest.mark.parametrize("value", [EVIL, "it's", 'a"b$c`d\\e', "$(touch pwned)"])
def test_injection_inert_inside_double_quoted_ssh(value: str, tmp_path: Path) -> None:
    out = edited(SSH, Edit("set", "--dist-init-addr", value=value))
    assert out.startswith('ssh -p 22 ubuntu@10.0.0.1 "cd /srv/sglang && nohup python ')
    words = bash_words(out.removeprefix("ssh "), cwd=tmp_path)
    assert not (tmp_path / "pwned").exists()
    assert words[:3] == ["-p", "22", "ubuntu@10.0.0.1"] and len(words) == 4
    remote = shlex.split(words[3])
    assert remote[:3] == ["cd", "/srv/sglang", "&&"]
    args = argv_after_entry(remote)
    assert args[args.index("--dist-init-addr") + 1] == value
    assert args[-4:] == [">", "node0.log", "2>&1", "&"]


def test_injection_inert_inside_ssh_unquoted_words() -> None:
    text = "ssh host python -m sglang.launch_server --tp 8"
    out = edited(text, Edit("add", "--chat-template", value=EVIL))
    # ssh joins its words with spaces and the remote shell parses them again
    remote = shlex.split(" ".join(shlex.split(out)[2:]))
    assert argv_after_entry(remote) == ["--tp", "8", "--chat-template", EVIL]
    assert parse(out).get("--chat-template") == EVIL


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_injection_inert_nested_ssh_bash_c() -> None:
    text = "ssh host \"bash -c 'python -m sglang.launch_server --tp 8'\""
    out = edited(text, Edit("set", "--tp", value=EVIL))
    level1 = bash_words(out.removeprefix("ssh "))[-1]
    level2 = shlex.split(level1)[-1]
    assert argv_after_entry(shlex.split(level2)) == ["--tp", EVIL]


def test_new_flag_name_is_quoted_too() -> None:
    out = edited(KIMI, Edit("add", "--x;rm", value="1"))
    assert argv_after_entry(shlex.split(out))[-2:] == ["--x;rm", "1"]


# --------------------------------------------------------------------------- real shell

BASH = shutil.which("bash")


@pytest.fixture
def fake_bin(tmp_path: Path) -> Path:
    """A PATH dir whose `python`/`ssh` record argv instead of launching anything."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    recorder = f"#!{sys.executable}\nimport json, sys\nprint('ARGV ' + json.dumps(sys.argv[1:]))\n"
    for name in ("python", "python3"):
        (bin_dir / name).write_text(recorder)
    (bin_dir / "ssh").write_text(
        "#!/bin/sh\n"
        'while [ "${1#-}" != "$1" ]; do case "$1" in -p|-i|-o) shift 2;; *) shift;; esac; done\n'
        'shift\nexec /bin/sh -c "$*"\n'
    )
    for path in bin_dir.iterdir():
        path.chmod(0o755)
    return bin_dir


def run_recorded(command: str, fake_bin: Path) -> list[str]:
    env = dict(os.environ, PATH=f"{fake_bin}:{os.environ.get('PATH', '')}")
    done = subprocess.run(
        [BASH or "bash", "-c", command],
        cwd=fake_bin.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=20,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("ARGV ")]
    assert len(lines) == 1, (command, done.stdout, done.stderr)
    return json.loads(lines[0][5:])


SHELL_CASES = [
    "python -m sglang.launch_server --model-path /m --tp 8 --port 1",
    "bash -c 'python -m sglang.launch_server --model-path /m --tp 8 --port 1 '",
    'sh -c "python -m sglang.launch_server --model-path /m --tp=8 --port 1"',
    'ssh -p 22 u@h "cd / && python -m sglang.launch_server --tp 8 --port 1"',
    "ssh h 'cd / ; python -m sglang.launch_server --tp 8 --port 1 '\"'\"'--x=a b'\"'\"",
    "ssh h python -m sglang.launch_server --tp 8 --port 1",
    "ssh h \"bash -c 'python -m sglang.launch_server --tp 8 --port 1'\"",
    "python -m sglang.launch_server \\\n  --tp 8 \\\n  --port 1",
    "bash -c $'python -m sglang.launch_server --tp 8 --port \\'1\\''",
]


@pytest.mark.skipif(BASH is None, reason="needs bash")
@pytest.mark.parametrize("text", SHELL_CASES)
@pytest.mark.parametrize("value", [EVIL, "it's", 'a "b" `touch pwned` $HOME \\', "x\ny z"])
def test_real_shell_runs_the_edited_arguments(
    text: str, value: str, fake_bin: Path, tmp_path: Path
) -> None:
    edits = [
        Edit("set", "--tp", value=value),
        Edit("add", "--chat-template", value=value),
        Edit("rename", "--port", to="--listen-port", value=value),
    ]
    pwned_before = Path("/tmp/pwned").exists()
    new = parse(text).apply(edits)
    argv = run_recorded(new.render(), fake_bin)
    assert argv[:2] == ["-m", "sglang.launch_server"]
    if "--tp" in argv:
        assert argv[argv.index("--tp") + 1] == value
    else:
        assert f"--tp={value}" in argv
    assert argv[argv.index("--listen-port") + 1] == value
    assert argv[-2:] == ["--chat-template", value]
    assert not (tmp_path / "pwned").exists()
    assert pwned_before or not Path("/tmp/pwned").exists()


# --------------------------------------------------------------------------- find_launch_command


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("$ python -m sglang.launch_server --tp 8", "python -m sglang.launch_server --tp 8"),
        ("# python3 -m sglang.launch_server --tp 8", "python3 -m sglang.launch_server --tp 8"),
        (
            "user@host:~$ python -m sglang.launch_server --tp 8",
            "python -m sglang.launch_server --tp 8",
        ),
        (
            "root@gpu-01:/workspace# CUDA_VISIBLE_DEVICES=0 python3 -m sglang.launch_server --tp 1",
            "CUDA_VISIBLE_DEVICES=0 python3 -m sglang.launch_server --tp 1",
        ),
        (
            "(sglang) ubuntu@ip-10-0-0-1:~/sg$ nohup python -m sglang.launch_server > log 2>&1 &",
            "nohup python -m sglang.launch_server > log 2>&1 &",
        ),
        ("[user@gpu01 ~]$ sglang serve --model-path /m", "sglang serve --model-path /m"),
        ("+ python3 -m sglang.launch_server --tp 8", "python3 -m sglang.launch_server --tp 8"),
        (
            "++ exec python3 -m sglang.launch_server --tp 8",
            "exec python3 -m sglang.launch_server --tp 8",
        ),
        ("python -m sglang.launch_server --tp 8\n", "python -m sglang.launch_server --tp 8"),
        ("  sglang serve --tp 8", "sglang serve --tp 8"),
        (
            "$ ssh node1 'python -m sglang.launch_server --tp 8'",
            "ssh node1 'python -m sglang.launch_server --tp 8'",
        ),
    ],
)
def test_find_launch_command_strips_prompts(line: str, expected: str) -> None:
    assert find_launch_command(line) == expected
    assert parse_launch_command(expected) is not None


@pytest.mark.parametrize(
    "line",
    [
        "grep sglang.launch_server log",
        "$ grep sglang.launch_server server.log",
        "pip install sglang",
        "$ pip install 'sglang[all]>=0.5'",
        "pgrep -a python3",
        "12345 python3 -m sglang.launch_server --tp 8",  # pgrep -a output: pid first
        "echo python -m sglang.launch_server",
        "ps aux | grep sglang.launch_server",
        '  File "/usr/lib/python3/dist-packages/sglang/launch_server.py", line 10, in <module>',
        "[2025-06-01 10:00:00] INFO server_args=ServerArgs(model_path='/m', tp_size=8)",
        "[2025-06-01 10:00:00] sglang serve is ready",
        "The server is fired up and ready to roll!",
        "",
    ],
)
def test_find_launch_command_rejects_non_launch_lines(line: str) -> None:
    assert find_launch_command(line) is None

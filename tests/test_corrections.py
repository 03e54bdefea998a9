"""Corrected commands: minimal edits, wrappers kept, quoted, valid for SGLang's catalog."""

from __future__ import annotations

import shlex

import pytest

from analyzer.pipeline import Options, analyze
from analyzer.sglang.catalog import load_catalog
from analyzer.sglang.catalog_check import validate
from analyzer.sglang.launch_command import parse_launch_command
from analyzer.sglang.log_format import reconstruct_command

CATALOG = load_catalog("0.5.23")
USAGE = "usage: sglang serve [-h] --model-path MODEL_PATH\n"
UNRECOGNIZED = USAGE + "sglang serve: error: unrecognized arguments: {args}\n"


def analyse(tmp_path, text: str, command: str | None = None):
    log = tmp_path / "run.log"
    log.write_text(text)
    report = analyze([str(log)], Options(command=command))
    assert report.incidents, "expected an incident"
    return report.incidents[0]


WRAPPED = [
    (
        "CUDA_VISIBLE_DEVICES=0,1,2,3 NCCL_DEBUG=INFO python3 -m sglang.launch_server "
        "--model-path /m --tp-size 4 --num-speculative-tokens 4 --port 30000",
        "CUDA_VISIBLE_DEVICES=0,1,2,3 NCCL_DEBUG=INFO python3 -m sglang.launch_server "
        "--model-path /m --tp-size 4 --speculative-num-draft-tokens 4 --port 30000",
    ),
    (
        "nohup python -m sglang.launch_server --model-path /m --num-speculative-tokens=4 "
        "> /data/run.log 2>&1 &",
        "nohup python -m sglang.launch_server --model-path /m --speculative-num-draft-tokens=4 "
        "> /data/run.log 2>&1 &",
    ),
    (
        "ssh root@gpu-node 'cd /data && nohup bash -c \"python -m sglang.launch_server "
        "--model-path /m --num-speculative-tokens 4\" > run.log 2>&1 &'",
        "ssh root@gpu-node 'cd /data && nohup bash -c \"python -m sglang.launch_server "
        "--model-path /m --speculative-num-draft-tokens 4\" > run.log 2>&1 &'",
    ),
    (
        "sglang serve --model-path /m \\\n  --num-speculative-tokens 4 \\\n  --tp 8 2>&1 | tee run.log",
        "sglang serve --model-path /m \\\n  --speculative-num-draft-tokens 4 \\\n  --tp 8 2>&1 | tee run.log",
    ),
]


@pytest.mark.parametrize(("command", "corrected"), WRAPPED, ids=["env", "nohup", "ssh", "tee"])
def test_rename_keeps_the_wrapper_and_the_value(tmp_path, command, corrected):
    incident = analyse(tmp_path, UNRECOGNIZED.format(args="--num-speculative-tokens 4"), command)
    assert incident.offending_flags == ["--num-speculative-tokens"]
    assert incident.corrected_command == corrected
    assert [e.as_json() for e in incident.edits] == [
        {
            "op": "rename",
            "flag": "--num-speculative-tokens",
            "to": "--speculative-num-draft-tokens",
            "value": None,
        }
    ]


def test_command_found_in_the_log_is_used(tmp_path):
    text = "+ python -m sglang.launch_server --model-path /m --max-model-len 8192\n"
    text += UNRECOGNIZED.format(args="--max-model-len 8192")
    incident = analyse(tmp_path, text)
    assert incident.command_source == "log"
    assert incident.corrected_command == (
        "python -m sglang.launch_server --model-path /m --context-length 8192"
    )


def test_unknown_flag_without_a_close_match_is_dropped_not_renamed(tmp_path):
    """No SGLang flag is meant: nothing is invented; the command SGLang accepts is the one
    without the flag (and its value), and the advice says it was dropped."""
    command = "python -m sglang.launch_server --model-path /m --frobnicate-widgets 3 --port 8"
    incident = analyse(tmp_path, UNRECOGNIZED.format(args="--frobnicate-widgets 3"), command)
    assert incident.corrected_command == "python -m sglang.launch_server --model-path /m --port 8"
    assert [(e.op, e.flag, e.to) for e in incident.edits] == [
        ("remove", "--frobnicate-widgets", None)
    ]
    assert any("closest:" in a for a in incident.advice)
    assert any("dropping --frobnicate-widgets" in a for a in incident.advice)


@pytest.mark.parametrize(
    ("typed", "meant"),
    [
        # a word swapped for another is another option, however alike the rest
        ("--enable-flashinfer-mla", None),
        ("--enable-ep-moe", None),
        # a misspelt word, a cut one, an extra one: the option meant
        ("--mem-fraction-statc", "--mem-fraction-static"),
        ("--quantization-method", "--quantization"),
    ],
)
def test_a_rename_keeps_every_word_or_adds_and_drops_only(typed, meant):
    from analyzer.repair.fixes import replacement_for
    from analyzer.sglang.catalog import load_catalog

    assert replacement_for(typed, load_catalog("0.5.23"))[0] == meant


def test_invalid_choice_with_no_choice_meant_is_dropped_to_the_default(tmp_path):
    command = "python -m sglang.launch_server --model-path /m --attention-backend sdpa_x"
    error = (
        "launch_server.py: error: argument --attention-backend: invalid choice: 'sdpa_x' "
        "(choose from 'triton', 'torch_native', 'flashinfer')\n"
    )
    incident = analyse(tmp_path, error, command)
    assert incident.rule_class == "argparse_invalid"
    assert incident.corrected_command == "python -m sglang.launch_server --model-path /m"
    # the last resort: the advice says what is lost, the edit carries intent_lost
    assert any("SGLang chooses the attention backend itself" in a for a in incident.advice)
    assert [e.intent_lost for e in incident.edits] == [True]


def test_value_that_follows_a_flag_is_not_a_flag(tmp_path):
    command = "python -m sglang.launch_server --model-path /m --num-speculative-tokens -1"
    incident = analyse(tmp_path, UNRECOGNIZED.format(args="--num-speculative-tokens -1"), command)
    assert incident.offending_flags == ["--num-speculative-tokens"]


SPEC_ASSERT = """Traceback (most recent call last):
  File "/x/sglang/srt/arg_groups/speculative_hook.py", line 1162, in _handle_eagle_family
    and cfg.speculative_num_draft_tokens is None
        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
AssertionError
"""


@pytest.mark.parametrize(
    ("flags", "added"),
    [
        (
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 4",
            " --speculative-num-steps 3",
        ),
        (
            "--speculative-eagle-topk 1 --speculative-num-draft-tokens 6",
            " --speculative-num-steps 5",
        ),
        (
            "--speculative-eagle-topk 4 --speculative-num-draft-tokens 8",
            " --speculative-num-steps 3",
        ),
        (
            "--speculative-num-draft-tokens 4",
            " --speculative-num-steps 3 --speculative-eagle-topk 1",
        ),
    ],
)
def test_speculative_settings_are_completed_consistently(tmp_path, flags, added):
    command = (
        f"python -m sglang.launch_server --model-path /m --speculative-algorithm EAGLE3 {flags}"
    )
    incident = analyse(tmp_path, SPEC_ASSERT, command)
    assert incident.rule_class == "spec_assertion"
    assert incident.corrected_command == command + added
    assert "--speculative-num-steps" in incident.offending_flags


def test_invalid_choice_is_respelled(tmp_path):
    text = USAGE + (
        "sglang serve: error: argument --tokenizer-mode: invalid choice: 'Auto' "
        "(choose from 'auto', 'slow')\n"
    )
    command = "python -m sglang.launch_server --model-path /m --tokenizer-mode Auto"
    incident = analyse(tmp_path, text, command)
    assert incident.rule_class == "argparse_invalid"
    assert incident.offending_flags == ["--tokenizer-mode"]
    assert incident.corrected_command.endswith("--tokenizer-mode auto")


def test_ambiguous_prefix_names_a_real_flag(tmp_path):
    text = USAGE + (
        "sglang serve: error: ambiguous option: --cuda-graph-max-bs could match "
        "--cuda-graph-max-bs-decode, --cuda-graph-max-bs-prefill\n"
    )
    command = "python -m sglang.launch_server --model-path /m --cuda-graph-max-bs 16"
    incident = analyse(tmp_path, text, command)
    assert incident.rule_class == "argparse_invalid"
    assert incident.corrected_command.endswith("--cuda-graph-max-bs-decode 16")


SPEC_DRAFT_AMBIGUOUS = (
    "sglang serve: error: ambiguous option: --speculative-draft could match "
    "--speculative-draft-model-path, --speculative-draft-model, --speculative-draft-model-revision, "
    "--speculative-draft-load-format, --speculative-draft-window\n"
)


@pytest.mark.parametrize(
    ("value", "meant"),
    [
        ("/models/eagle3-draft", "--speculative-draft-model-path"),  # a path: only the path's
        ("main", None),  # a word: the path and the revision both take it
    ],
)
def test_an_ambiguous_prefix_is_resolved_only_when_one_option_takes_the_value(
    tmp_path, value, meant
):
    command = f"python -m sglang.launch_server --model-path /m --speculative-draft {value}"
    incident = analyse(tmp_path, USAGE + SPEC_DRAFT_AMBIGUOUS, command)
    assert incident.rule_class == "argparse_invalid"
    if meant is None:
        assert incident.corrected_command is None
        assert incident.offending_flags == ["--speculative-draft"]
    else:
        assert incident.corrected_command.endswith(f"{meant} {value}")
        assert incident.offending_flags == ["--speculative-draft", meant]


def test_shell_syntax_from_a_log_comes_out_quoted_and_inert(tmp_path):
    text = (
        '+ python -m sglang.launch_server --model-path /m --served-model-name "$(touch /tmp/pwned)" '
        "--num-speculative-tokens 4\n" + UNRECOGNIZED.format(args="--num-speculative-tokens 4")
    )
    incident = analyse(tmp_path, text)
    corrected = incident.corrected_command
    assert "'$(touch /tmp/pwned)'" in corrected
    words = shlex.split(corrected)
    assert words[words.index("--served-model-name") + 1] == "$(touch /tmp/pwned)"


def test_every_corrected_command_validates_against_the_catalog(tmp_path):
    for command, _ in WRAPPED:
        incident = analyse(
            tmp_path, UNRECOGNIZED.format(args="--num-speculative-tokens 4"), command
        )
        parsed = parse_launch_command(incident.corrected_command, CATALOG.takes_value)
        assert validate(parsed, CATALOG) == []


def test_validation_rejects_unknown_ambiguous_bad_and_duplicate_flags():
    parsed = parse_launch_command(
        "sglang serve --model-path /m --tp-size two --cuda-graph-max-bs 8 --nope 1 --tp 2",
        CATALOG.takes_value,
    )
    problems = validate(parsed, CATALOG)
    assert any("expects int" in p for p in problems)
    assert any("ambiguous" in p for p in problems)
    assert any("--nope is unknown" in p for p in problems)
    assert any("--tp-size is given twice" in p for p in problems)


def test_command_is_reconstructed_from_server_args():
    settings = {
        "model_path": "/models/Kimi K2",
        "tp_size": 8,
        "trust_remote_code": True,
        "speculative_algorithm": "EAGLE3",
        "port": 30000,
        "nonexistent_field": 1,
    }
    command = reconstruct_command(settings, CATALOG)
    assert command == (
        "python -m sglang.launch_server --model-path '/models/Kimi K2' "
        "--speculative-algorithm EAGLE3 --tp-size 8 --trust-remote-code"
    )


def test_invalid_choice_reads_the_choices_argparse_printed(tmp_path):
    """The user's release printed its own choices; the catalog's release may lack one."""
    text = USAGE + (
        "sglang serve: error: argument --attention-backend: invalid choice: "
        "'dual-chunk-flash-attn' (choose from 'triton', 'dual_chunk_flash_attn', 'fa3')\n"
    )
    command = (
        "python -m sglang.launch_server --model-path /m --attention-backend dual-chunk-flash-attn"
    )
    incident = analyse(tmp_path, text, command)
    assert incident.rule_class == "argparse_invalid"
    assert any("SGLang spells it dual_chunk_flash_attn" in a for a in incident.advice)
    other = analyse(tmp_path, text.replace("'dual-chunk-flash-attn'", "'sdpa'"), command)
    assert any(a.endswith("accepts: triton, dual_chunk_flash_attn, fa3") for a in other.advice)

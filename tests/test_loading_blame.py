"""A loading failure blames the path flag whose folder or file failed, not the size flags
its frames run through; a GPU below SGLang's own floor is the environment."""

from __future__ import annotations

from analyzer.blame.loading_blame import loading_flags
from analyzer.pipeline import Options, analyze
from analyzer.sglang.catalog import load_catalog
from analyzer.sglang.launch_command import parse_launch_command
from tests.fixture_cases import FIXTURES

COMMAND = (
    "python -m sglang.launch_server --model-path /models/target --speculative-algorithm EAGLE3 "
    "--speculative-draft-model-path /models/draft --context-length 8192"
)
MESSAGE = ["OSError: /models/draft does not appear to have a file named config.json."]


def _parsed(text: str):
    return parse_launch_command(text, load_catalog("0.5.23").takes_value)


def test_the_path_the_message_names_is_blamed_and_frame_sizes_are_not():
    flags = ["--context-length", "--speculative-algorithm"]
    found = loading_flags(flags, {"--context-length"}, MESSAGE, _parsed(COMMAND))
    assert found == ["--speculative-draft-model-path", "--speculative-algorithm"]


def test_without_a_named_path_only_frame_sizes_go():
    found = loading_flags(["--context-length"], {"--context-length"}, ["OSError: x"], None)
    assert found == []


def test_a_real_draft_path_failure_blames_the_draft_path_only():
    log = FIXTURES / "real" / "model_load_bad_draft_model_path.log"
    command = (
        "python -m sglang.launch_server --model-path fixtures/models/llama-target --device cpu "
        "--speculative-algorithm EAGLE3 --speculative-draft-model-path "
        "fixtures/models/eagle3_draft --context-length 2048 --mem-fraction-static 0.5"
    )
    report = analyze([str(log)], Options(command=command))
    assert report.incidents[0].offending_flags == ["--speculative-draft-model-path"]


def test_a_gpu_below_sglangs_floor_is_the_environment():
    report = analyze([str(FIXTURES / "source" / "environment_gpu_below_sm75.log")], Options())
    root = report.incidents[0]
    assert root.rule_class == "environment" and root.offending_flags == []
    assert "Check the model path" not in " ".join(root.advice)
    assert "SGLang bug" not in root.explanation

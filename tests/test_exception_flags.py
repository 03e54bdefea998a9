"""Flags an exception message spells (analyzer/blame/link.py exception_flags): an option,
a ServerArgs field, a field in prose; on every incident a traceback gives, the unknown one
and a cut traceback's too. Messages are SGLang 0.5.23's as its source writes them."""

from __future__ import annotations

from pathlib import Path

from analyzer.blame.link import exception_flags
from analyzer.core.model import Line, Traceback
from analyzer.pipeline import Options, analyze
from analyzer.sglang.catalog import load_catalog
from analyzer.sglang.launch_command import parse_launch_command

CATALOG = load_catalog("0.5.23")


def _lone(message: str, exception: str = "RuntimeError", chain: tuple = ()) -> Traceback:
    text = f"{exception}: {message}"
    return Traceback((Line("x.log", 1, text, text),), (), exception, message, chain)


def _command(text: str):
    command = parse_launch_command(text, CATALOG.takes_value)
    assert command is not None
    return command


def test_an_option_the_message_names_is_blamed_set_or_not():
    # distributed/bootstrap.py: the option SGLang asks about
    lone = _lone(
        "--enable-tp-lm-head-all-to-all requires an available PyNCCL communicator for CUDA "
        "graph capture."
    )
    assert exception_flags(lone, CATALOG, None) == ["--enable-tp-lm-head-all-to-all"]
    other = _command("python -m sglang.launch_server --model-path m --tp-size 2")
    assert exception_flags(lone, CATALOG, other) == ["--enable-tp-lm-head-all-to-all"]


def test_a_field_or_prose_is_blamed_only_when_the_command_sets_it():
    # distributed/utils.py get_pp_indices, and a `TP size` in prose
    field = _lone("len(partitions)=2 does not match pp_size=3.", "ValueError")
    prose = _lone("Weight output_partition_size = 8 is not divisible by TP size 3.", "ValueError")
    assert exception_flags(field, CATALOG, None) == ["--pp-size"]
    assert exception_flags(prose, CATALOG, None) == ["--tp-size"]
    unset = _command("python -m sglang.launch_server --model-path m --port 30000")
    assert exception_flags(field, CATALOG, unset) == []
    assert exception_flags(prose, CATALOG, unset) == []
    setting = _command("python -m sglang.launch_server --model-path m --pp-size 3 --tp 3")
    assert exception_flags(field, CATALOG, setting) == ["--pp-size"]
    assert exception_flags(prose, CATALOG, setting) == ["--tp-size"]


def test_a_field_read_off_self_is_a_field():
    # disaggregation/: `Invalid self.disaggregation_mode=...`; a dotted name of no field is not
    lone = _lone("Invalid self.disaggregation_mode='x'", "ValueError")
    assert exception_flags(lone, CATALOG, None) == ["--disaggregation-mode"]
    assert exception_flags(_lone("bad self.kv_pool_size=3"), CATALOG, None) == []


def test_hyphenated_fields_and_chained_causes_are_read():
    cause = _lone("TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3 or auto.")
    final = _lone("boom", chain=(cause,))
    assert exception_flags(final, CATALOG, None) == ["--kv-cache-dtype"]


def test_words_that_are_no_flag_are_not_blamed():
    assert exception_flags(None, CATALOG, None) == []
    # an option SGLang does not know, a field inside a longer name, a path, one bare word
    text = "--no-such-option failed: index_page_size at /models/page_size/x, device cuda:1"
    assert exception_flags(_lone(text), CATALOG, None) == []
    # two words that are no field's name
    assert exception_flags(_lone("the page table is full"), CATALOG, None) == []


def test_an_unknown_exception_and_a_crash_carry_the_flag_the_message_names(
    tmp_path: Path,
):
    package = "/usr/local/lib/python3.11/site-packages/sglang/srt"
    log = tmp_path / "run.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        f'  File "{package}/distributed/bootstrap.py", line 413, in init_lm_head_comm\n'
        "    raise RuntimeError(\n"
        "RuntimeError: --enable-tp-lm-head-all-to-all requires an available PyNCCL "
        "communicator for CUDA graph capture.\n"
    )
    (root,) = analyze([str(log)], Options()).incidents
    assert root.offending_flags == ["--enable-tp-lm-head-all-to-all"]
    with log.open("a") as out:
        out.write(
            "[2025-11-03 09:12:10] Received sigquit from a child process. It usually means the child failed.\n"
        )
    root = analyze([str(log)], Options()).incidents[0]
    assert root.offending_flags == ["--enable-tp-lm-head-all-to-all"]

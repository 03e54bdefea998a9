"""argparse's usage text read back into the user's parser (analyzer/sglang/usage_text.py),
and flags judged by it when it is a release no shipped catalog covers."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from analyzer.core.model import InputSummary
from analyzer.engine.scan import scan_lines
from analyzer.pipeline import Options, analyze
from analyzer.sglang.catalog import FlagCatalog, FlagSpec, load_catalog, shipped_versions
from analyzer.sglang.usage_text import ParserUsage, judge_by_usage, read_usage, server_usage

ROOT = Path(__file__).resolve().parent.parent
SGLANG_PYTHON = os.environ.get("LOGANALYZE_SGLANG_PYTHON")
RELEASES = ROOT / os.environ.get("LOGANALYZE_SGLANG_HOME", ".sglang") / "releases"
needs_sglang = pytest.mark.skipif(not SGLANG_PYTHON, reason="LOGANALYZE_SGLANG_PYTHON is not set")

# Real usage texts: SGLang's own parser rejecting a command (scripts/generate_real_fixtures.py
# and the older-release runs of fixtures/versions/).
REAL_USAGE = {
    "0.5.23": ROOT / "fixtures/real/invalid_choice_dtype.log",
    "0.5.6.post2": ROOT / "fixtures/versions/sglang-0.5.6.post2_newer_flag_on_older_release.log",
}

# A 0.1-era server parser, written from that era's facts: prog launch_server.py, the
# `--tp-size` spelling only, `--enable-flashinfer` a switch of its own, a handful of options
# (fewer than the usage clue of releases.py needs, so the newest catalog is chosen).
OLD_USAGE = """\
usage: launch_server.py [-h] --model-path MODEL_PATH
                        [--tokenizer-path TOKENIZER_PATH] [--host HOST]
                        [--port PORT]
                        [--additional-ports [ADDITIONAL_PORTS ...]]
                        [--load-format {auto,pt,safetensors,npcache,dummy}]
                        [--tokenizer-mode {auto,slow}] [--trust-remote-code]
                        [--mem-fraction-static MEM_FRACTION_STATIC]
                        [--tp-size TP_SIZE] [--log-level LOG_LEVEL]
                        [--disable-log-stats] [--enable-flashinfer]
                        [--attention-reduce-in-fp32] [--disable-radix-cache]
                        [--disable-regex-jump-forward]
"""
OLD_LAUNCH = (
    "$ python -m sglang.launch_server --model-path meta-llama/Llama-2-7b-chat-hf "
    "--enable-flashinfer {extra}\n"
)


def _old_log(tmp_path: Path, extra: str, error: str) -> Path:
    log = tmp_path / "old.log"
    text = OLD_LAUNCH.format(extra=extra) + OLD_USAGE + f"launch_server.py: error: {error}\n"
    log.write_text(text, encoding="utf-8")
    return log


def _visible(catalog: FlagCatalog) -> dict[str, FlagSpec]:
    """What argparse's usage shows of each option: its first spelling (both of a
    BooleanOptionalAction), keyed to the option."""
    shown = {}
    for spec in catalog.specs:
        both = spec.action == "BooleanOptionalAction"
        for string in spec.option_strings if both else spec.option_strings[:1]:
            shown[string] = spec
    return shown


def _assert_reads_back(usage: ParserUsage, catalog: FlagCatalog) -> None:
    shown = _visible(catalog)
    assert usage.is_server
    assert usage.spellings <= set(shown)
    # what the usage leaves out is only what argparse hides (help=SUPPRESS: no help kept)
    assert all(shown[o].help == "" for o in set(shown) - usage.spellings)
    assert len(usage.spellings) > 250
    for option in usage.options:
        spec = catalog.resolve(option.strings[0]).spec
        assert spec is not None and spec.option_strings[0] == option.strings[0]
        assert option.takes_value == spec.takes_value, option
        assert option.required == spec.required, option
        expected = {str(c) for c in spec.choices} if spec.choices else None
        assert (set(option.choices) if option.choices else None) == expected, option


@pytest.mark.parametrize("version", sorted(REAL_USAGE))
def test_a_real_usage_text_reads_back_to_its_release_catalog(version: str) -> None:
    path = REAL_USAGE[version]
    lines = path.read_text(encoding="utf-8").splitlines()
    log = scan_lines(InputSummary(str(path)), lines, [])
    usage = server_usage(log)
    assert usage is not None
    _assert_reads_back(usage, load_catalog(version))
    # its own catalog has every option it lists: nothing to judge by the usage instead
    assert judge_by_usage(log, load_catalog(version), []) is None


def _installed(version: str) -> tuple[list[str], dict[str, str]] | None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SGLANG_")}
    if version == shipped_versions()[-1]:
        return [str(SGLANG_PYTHON)], env
    folder = RELEASES / version
    if not (folder / "sglang").is_dir():
        return None
    return [str(SGLANG_PYTHON)], {**env, "PYTHONPATH": str(folder)}


@pytest.mark.sglang
@needs_sglang
@pytest.mark.parametrize("version", shipped_versions())
def test_the_usage_an_installed_release_prints_reads_back_to_its_catalog(version: str) -> None:
    found = _installed(version)
    if found is None:
        pytest.skip(f"sglang {version} is not installed under {RELEASES}")
    python, env = found
    proc = subprocess.run(
        [*python, "-m", "sglang.launch_server", "--bogus"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert proc.returncode == 2, proc.stderr[-2000:]
    text = proc.stderr[proc.stderr.index("usage: ") :]
    usage = read_usage(" ".join(text.splitlines()[:-1]))
    assert usage is not None
    _assert_reads_back(usage, load_catalog(version))


def test_argparse_shapes_read_as_argparse_wrote_them() -> None:
    usage = read_usage(
        "usage: prog [-h] --need NEED [--maybe [MAYBE]] [--many [MANY ...]] "
        "[--some SOME [SOME ...]] [--pair PAIR PAIR] [--pick {a,b}] "
        "[--on | --no-on] [--one | --other OTHER] (--this | --that) [--flag]"
    )
    assert usage is not None and usage.prog == "prog"
    read = {o.strings: (o.takes_value, o.choices, o.required) for o in usage.options}
    assert read == {
        ("-h",): (False, None, False),
        ("--need",): (True, None, True),
        ("--maybe",): (True, None, False),
        ("--many",): (True, None, False),
        ("--some",): (True, None, False),
        ("--pair",): (True, None, False),
        ("--pick",): (True, ("a", "b"), False),
        ("--on", "--no-on"): (False, None, False),
        ("--one",): (False, None, False),
        ("--other",): (True, None, False),
        ("--this",): (False, None, True),
        ("--that",): (False, None, True),
        ("--flag",): (False, None, False),
    }
    assert not usage.is_server  # not SGLang's server parser: no --model-path, another prog


def test_a_0_1_era_typed_switch_is_not_called_expanded(tmp_path: Path) -> None:
    error = "unrecognized arguments: --tensor-parallel-size 2"
    log = _old_log(tmp_path, "--tp 2 --tensor-parallel-size 2", error)
    report = analyze([str(log)])
    summary = report.inputs[0]
    assert summary.catalog_version == shipped_versions()[-1]
    assert "older than every shipped catalog" in (summary.catalog_reason or "")
    assert "SGLang's usage text lists --additional-ports" in (summary.catalog_reason or "")
    expanded = [i for i in report.incidents if i.rule == "flag-prefix-expanded"]
    # `--tp` is a prefix of 0.1's --tp-size too: that warning stays, about --tp only
    assert [i.title for i in expanded] == [
        "A shortened flag was silently expanded: --tp -> --tp-size"
    ]
    unrecognized = next(i for i in report.incidents if i.rule == "argparse-unrecognized")
    # the corrected command keeps only options the usage lists: 0.1 spells it --tp-size, and
    # --tp (its prefix) already set it
    assert unrecognized.corrected_command == (
        "python -m sglang.launch_server --model-path meta-llama/Llama-2-7b-chat-hf "
        "--enable-flashinfer --tp 2"
    )
    assert expanded[0].corrected_command == unrecognized.corrected_command.replace(
        "--tp 2", "--tp-size 2"
    )


def test_a_rename_to_an_option_the_usage_lacks_is_not_offered(tmp_path: Path) -> None:
    log = _old_log(
        tmp_path,
        "--num-speculative-tokens 4 --disable-cuda-graph",
        "unrecognized arguments: --num-speculative-tokens 4 --disable-cuda-graph",
    )
    incident = next(i for i in analyze([str(log)]).incidents)
    assert incident.rule == "argparse-unrecognized"
    command = incident.corrected_command or ""
    assert "--speculative" not in command and "--disable-cuda-graph" not in command
    assert any("no rename is offered" in a for a in incident.advice)
    assert any("usage text of this release does not list it" in a for a in incident.advice)


def test_without_the_usage_text_the_catalog_still_judges(tmp_path: Path) -> None:
    """The negative: the same launch with no usage text is judged by the newest catalog,
    whose --enable-flashinfer-allreduce-fusion the typed switch is a prefix of."""
    log = tmp_path / "run.log"
    log.write_text(OLD_LAUNCH.format(extra="--tp-size 2"), encoding="utf-8")
    report = analyze([str(log)])
    assert "usage text" not in (report.inputs[0].catalog_reason or "")
    titles = [i.title for i in report.incidents if i.rule == "flag-prefix-expanded"]
    assert titles and "--enable-flashinfer ->" in titles[0]


def test_a_cut_or_foreign_usage_text_is_not_read_as_the_parser(tmp_path: Path) -> None:
    cut = OLD_LAUNCH.format(extra="") + OLD_USAGE  # no `error:` line: maybe cut short
    foreign = OLD_USAGE.replace("launch_server.py", "bench_serving.py") + (
        "bench_serving.py: error: unrecognized arguments: --bogus\n"
    )
    for text in (cut, foreign):
        log = scan_lines(InputSummary("x.log"), text.splitlines(), [])
        assert judge_by_usage(log, load_catalog(), [load_catalog()]) is None


def test_a_usage_text_with_options_the_catalog_lacks_builds_the_users_parser() -> None:
    log = scan_lines(
        InputSummary("x.log"),
        [*OLD_USAGE.splitlines(), "launch_server.py: error: unrecognized arguments: --x"],
        [],
    )
    judged = judge_by_usage(log, load_catalog(), [load_catalog()])
    assert judged is not None
    catalog, note = judged
    assert catalog.from_usage and "--additional-ports" in note
    assert catalog.resolve("--enable-flashinfer").kind == "exact"
    assert catalog.resolve("--tensor-parallel-size").kind == "unknown"
    assert catalog.takes_value("--tp-size") is True
    assert catalog.check_value("--load-format", "gguf") is not None
    assert catalog.by_dest("tp_size") is not None  # type and dest from the shipped catalog


def test_a_transcript_shows_the_usage_text_and_its_flags_are_judged_by_it(tmp_path: Path) -> None:
    transcript = tmp_path / "session.txt"
    transcript.write_text(
        OLD_LAUNCH.format(extra="--tensor-parallel-size 2")
        + OLD_USAGE
        + "launch_server.py: error: unrecognized arguments: --tensor-parallel-size 2\n",
        encoding="utf-8",
    )
    report = analyze([str(transcript)], Options(input_format="text"))
    assert "judged by the options its usage text lists" in (report.inputs[0].catalog_reason or "")
    incident = next(i for i in report.incidents if i.rule == "argparse-unrecognized")
    assert incident.corrected_command == (
        "python -m sglang.launch_server --model-path meta-llama/Llama-2-7b-chat-hf "
        "--enable-flashinfer --tp-size 2"
    )

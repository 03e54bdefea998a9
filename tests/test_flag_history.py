"""Flag history from the shipped catalogs (analyzer/sglang/flag_history.py)."""

from __future__ import annotations

import datetime
import json
from importlib import resources

import pytest

from analyzer.pipeline import Options, analyze
from analyzer.sglang.catalog import load_catalog, shipped_versions, version_key
from analyzer.sglang.flag_history import shipped_history
from tests.fixture_cases import FIXTURES

HISTORY = shipped_history()


def test_at_least_three_releases_spread_over_a_year_are_shipped():
    versions = shipped_versions()
    assert len(versions) >= 3
    assert versions == sorted(versions, key=version_key)
    assert versions[0] == "0.5.6.post2" and versions[-1] == "0.5.23"


@pytest.mark.parametrize("version", shipped_versions())
def test_every_catalog_records_its_version_build_date_and_fingerprint(version):
    text = resources.files("analyzer.catalogs").joinpath(f"sglang-{version}.json").read_text()
    data = json.loads(text)
    assert data["sglang_version"] == version
    datetime.date.fromisoformat(data["built"])
    assert "sglang serve" in data["prog"] or data["prog"]
    assert "__post_init__" in data["source_lines"]["srt/server_args.py"]


def test_known_rename_between_two_shipped_versions():
    """0.5.19 still had --cuda-graph-max-bs (setting cuda_graph_max_bs_decode); 0.5.23 dropped
    it, so on 0.5.23 it is an ambiguous prefix and --cuda-graph-max-bs-decode is the name."""
    change = HISTORY.change("--cuda-graph-max-bs", load_catalog("0.5.23"))
    assert change is not None and change.kind == "removed"
    assert (change.last_seen, change.gone_in) == ("0.5.19", "0.5.23")
    assert change.replacement == "--cuda-graph-max-bs-decode"
    assert HISTORY.change("--cuda-graph-max-bs", load_catalog("0.5.19")) is None


def test_rename_of_a_speculative_flag():
    change = HISTORY.change("--speculative-dflash-draft-window-size", load_catalog("0.5.23"))
    assert change.replacement == "--speculative-draft-window-size"


def test_a_newer_flag_on_an_older_release_names_that_release_and_the_old_spelling():
    change = HISTORY.change("--cuda-graph-max-bs-decode", load_catalog("0.5.6.post2"))
    assert change.kind == "added" and change.first_seen == "0.5.19"
    assert change.replacement == "--cuda-graph-max-bs"
    text = change.explain("0.5.6.post2")
    assert "new in sglang 0.5.19" in text and "does not have it" in text


def test_removed_without_successor_says_so():
    change = HISTORY.change("--enable-nan-detection", load_catalog("0.5.23"))
    assert change.kind == "removed" and change.replacement is None
    assert "has no option for that setting" in change.explain("0.5.23")


def test_flags_no_release_knows_and_flags_the_release_has_have_no_history():
    assert HISTORY.change("--num-speculative-tokens", load_catalog("0.5.23")) is None
    assert HISTORY.change("--tp-size", load_catalog("0.5.23")) is None


def test_the_ambiguous_prefix_fix_comes_from_the_history():
    fixture = FIXTURES / "real" / "invalid_ambiguous_cuda_graph_max_bs.log"
    command = "python -m sglang.launch_server --model-path m --cuda-graph-max-bs 8"
    report = analyze([str(fixture)], Options(command=command))
    root = report.incidents[0]
    assert root.corrected_command.endswith("--cuda-graph-max-bs-decode 8")
    assert any("removed between sglang 0.5.19 and 0.5.23" in a for a in root.advice)


def test_catalog_history_and_show_print_the_history():
    from typer.testing import CliRunner

    from analyzer.cli import app

    runner = CliRunner()
    history = runner.invoke(app, ["catalog", "history", "--cuda-graph-max-bs"])
    assert history.exit_code == 0
    lines = history.output.splitlines()
    assert lines[0].startswith("0.5.6.post2") and "exact -> --cuda-graph-max-bs" in lines[0]
    assert lines[-1].startswith("0.5.23") and "ambiguous: --cuda-graph-max-bs-decode" in lines[-1]
    show = runner.invoke(app, ["catalog", "show", "--stream-output"])
    assert show.exit_code == 1
    assert "use --incremental-streaming-output (the same setting)" in show.output


def test_an_option_is_reported_under_the_newest_releases_spelling():
    """0.5.6.post2 lists --tensor-parallel-size first, 0.5.23 --tp-size: one name either way,
    unless the older release does not accept the newer spelling."""
    assert HISTORY.spelling("--tensor-parallel-size", load_catalog("0.5.6.post2")) == "--tp-size"
    assert HISTORY.spelling("--tp", load_catalog("0.5.23")) == "--tp-size"
    assert load_catalog("0.5.13").canonical("--smg-http-sidecar-port") is None
    spelled = HISTORY.spelling("--grpc-http-sidecar-port", load_catalog("0.5.13"))
    assert spelled == "--grpc-http-sidecar-port"
    assert HISTORY.spelling("--max-model-len", load_catalog("0.5.23")) == "--max-model-len"


def test_a_rejected_spelling_names_the_option_it_means():
    assert HISTORY.meant("--reasoning_parser") == ["--reasoning-parser"]
    assert HISTORY.meant("--tensor-parallel-size") == ["--tp-size"]
    assert HISTORY.meant("--stream-output") == []  # 0.5.19 knows it by that very name
    assert HISTORY.meant("--max-model-len") == []  # vLLM's: no release knows it


def test_an_unrecognized_flag_is_reported_as_typed_and_as_the_option_it_means(tmp_path):
    log = tmp_path / "run.log"
    log.write_text(
        "launch_server.py: error: unrecognized arguments: --reasoning_parser kimi_k2 "
        "--max-model-len 4096\n"
    )
    root = analyze([str(log)]).incidents[0]
    assert root.rule_class == "argparse_unrecognized"
    assert root.offending_flags == ["--reasoning_parser", "--max-model-len", "--reasoning-parser"]

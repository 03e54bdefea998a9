"""The parse cache keeps parsed rules and catalogs between runs, and never serves stale data."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from analyzer.core import parse_cache
from analyzer.rulebook.vocabulary import load_rules
from analyzer.sglang.error_catalog import load_error_catalog

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "fixtures" / "real" / "unrecognized_set_x_wrapper.log"


class Counting:
    """A build function that parses `source` and counts its calls."""

    def __init__(self, source: Path) -> None:
        self.source = source
        self.calls = 0

    def __call__(self) -> list[str]:
        self.calls += 1
        return self.source.read_text("utf-8").split()


@pytest.fixture
def cache_at(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv(parse_cache.ENV_DIR, str(folder))
    return folder


def test_second_run_reads_the_cache_and_gets_the_same_value(cache_at: Path, tmp_path: Path):
    source = tmp_path / "data.txt"
    source.write_text("a b c", "utf-8")
    build = Counting(source)
    first = parse_cache.cached("demo", [source], build)
    second = parse_cache.cached("demo", [source], build)
    assert first == second == ["a", "b", "c"]
    assert build.calls == 1
    assert [p.name.startswith("demo-") for p in cache_at.iterdir()] == [True]


def test_a_changed_source_file_is_parsed_again(cache_at: Path, tmp_path: Path):
    source = tmp_path / "data.txt"
    source.write_text("a b c", "utf-8")
    build = Counting(source)
    parse_cache.cached("demo", [source], build)
    source.write_text("a b c d", "utf-8")
    assert parse_cache.cached("demo", [source], build) == ["a", "b", "c", "d"]
    # same size, later mtime: still parsed again
    source.write_text("x y z w", "utf-8")
    stat = source.stat()
    os.utime(source, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))
    assert parse_cache.cached("demo", [source], build) == ["x", "y", "z", "w"]
    assert build.calls == 3
    assert len(list(cache_at.iterdir())) == 1  # rewritten in place, not piled up


def test_a_changed_code_file_is_parsed_again(cache_at: Path, tmp_path: Path):
    source, code = tmp_path / "data.txt", tmp_path / "builder.py"
    source.write_text("a", "utf-8")
    code.write_text("# v1", "utf-8")
    build = Counting(source)
    parse_cache.cached("demo", [source, code], build)
    code.write_text("# v2, longer", "utf-8")
    parse_cache.cached("demo", [source, code], build)
    assert build.calls == 2


def test_an_unwritable_cache_dir_only_costs_the_parse(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("", "utf-8")
    monkeypatch.setenv(parse_cache.ENV_DIR, str(blocker / "cache"))
    source = tmp_path / "data.txt"
    source.write_text("a b", "utf-8")
    build = Counting(source)
    assert parse_cache.cached("demo", [source], build) == ["a", "b"]
    assert parse_cache.cached("demo", [source], build) == ["a", "b"]
    assert build.calls == 2
    assert blocker.read_text("utf-8") == ""


def test_a_damaged_cache_file_is_replaced(cache_at: Path, tmp_path: Path):
    source = tmp_path / "data.txt"
    source.write_text("a b", "utf-8")
    build = Counting(source)
    parse_cache.cached("demo", [source], build)
    [stored] = cache_at.iterdir()
    stored.write_bytes(stored.read_bytes()[:20])
    assert parse_cache.cached("demo", [source], build) == ["a", "b"]
    assert parse_cache.cached("demo", [source], build) == ["a", "b"]
    assert build.calls == 2


def test_an_empty_cache_dir_setting_turns_the_cache_off(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(parse_cache.ENV_DIR, "")
    assert parse_cache.cache_dir() is None
    source = tmp_path / "data.txt"
    source.write_text("a", "utf-8")
    build = Counting(source)
    parse_cache.cached("demo", [source], build)
    parse_cache.cached("demo", [source], build)
    assert build.calls == 2


def test_default_dir_follows_xdg_cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(parse_cache.ENV_DIR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert parse_cache.cache_dir() == tmp_path / "loganalyze"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert parse_cache.cache_dir() == tmp_path / ".cache" / "loganalyze"


def test_cached_rules_and_catalogs_equal_freshly_parsed_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(parse_cache.ENV_DIR, "")
    fresh_rules = load_rules()
    fresh_errors = load_error_catalog.__wrapped__("0.5.23")
    monkeypatch.setenv(parse_cache.ENV_DIR, str(tmp_path / "cache"))
    for _ in range(2):  # cold (parsed and stored), then warm (read back)
        assert load_rules() == fresh_rules
        assert load_error_catalog.__wrapped__("0.5.23").entries == fresh_errors.entries
    names = sorted(p.name.split("-")[0] for p in (tmp_path / "cache").iterdir())
    assert names == ["errors", "rules"]


def test_cli_report_is_byte_identical_with_and_without_the_cache(tmp_path: Path):
    def run(cache: str) -> str:
        env = {**os.environ, parse_cache.ENV_DIR: cache}
        command = [sys.executable, "-m", "analyzer", "--format", "json", str(LOG)]
        return subprocess.run(command, capture_output=True, text=True, env=env, cwd=ROOT).stdout

    uncached = run("")
    cold, warm = run(str(tmp_path / "cache")), run(str(tmp_path / "cache"))
    assert uncached == cold == warm
    assert '"rule": "argparse-unrecognized"' in uncached
    kinds = {p.name.split("-")[0] for p in (tmp_path / "cache").iterdir()}
    assert kinds == {"rules", "flags", "errors", "toml", "signals"}

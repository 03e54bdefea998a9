"""SGLang's error catalog: the miner (on a small fake release and, marked `sglang`, on a real
one), the shipped per-release catalogs, matching by message and by traceback frame.

The figure the catalog is built for is printed by `test_startup_sites_resolve_to_flags`:
of the 0.5.23 startup raise/assert sites whose guarding condition reads a server
argument, the share whose condition maps to at least one flag.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analyzer.sglang.catalog import shipped_versions
from analyzer.sglang.error_catalog import (
    ErrorCatalog,
    ErrorCatalogError,
    flag_resolution,
    load_error_catalog,
    shipped_error_versions,
)
from analyzer.sglang.error_catalog_build import build_error_catalog, dumps
from analyzer.sglang.error_source import template_of
from analyzer.sglang.release_source import package_version

ROOT = Path(__file__).resolve().parent.parent
CATALOGS = ROOT / "analyzer" / "catalogs"
ENTRY_KEYS = {
    "file", "function", "line", "end_line", "kind", "exception", "message", "pattern",
    "literals", "condition", "reads", "flags", "condition_reads", "condition_flags",
    "context", "context_reads", "context_flags", "startup",
}  # fmt: skip
STANDALONE_DP = "Currently standalone speculative decoding does not support dp attention."
EP_TP = "The expert parallel size must be 1 or the same as the tensor parallel size"


def _template(source: str):
    return template_of(ast.parse(source, mode="eval").body, {})


# -- templates --------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("source", "message", "rendered"),
    [
        ('f"--tp-size {self.tp_size} must be even"', "--tp-size {self.tp_size} must be even", "--tp-size 3 must be even"),
        ('"got %d pages, %s" % (n, name)', "got {n} pages, {name}", "got 12 pages, paged"),
        ('"{} requires {name}".format(a, name=b)', "{a} requires {b}", "--x requires --y"),
        ('"size " + str(len(xs)) + " (max 4)"', "size {len(xs)} (max 4)", "size 7 (max 4)"),
        ('f"rate {r:.2f} too high"', "rate {r} too high", "rate 0.95 too high"),
        ('"literal {braces}"', "literal {{braces}}", "literal {braces}"),
    ],
)  # fmt: skip
def test_message_templates_render_and_match(source: str, message: str, rendered: str) -> None:
    template = _template(source)
    assert template.text == message
    assert re.fullmatch(template.pattern, rendered), (template.pattern, rendered)


def test_number_fields_are_typed_and_literals_are_the_longest_fragments() -> None:
    template = _template('f"page_size={len(p)} must divide chunked_prefill_size={c}"')
    assert template.pattern.startswith(r"page_size=-?\d+(?:\.\d+)?")
    assert not re.fullmatch(template.pattern, "page_size=x must divide chunked_prefill_size=1")
    assert template.literals == ["must divide chunked_prefill_size=", "page_size="]
    multi = _template('"first line\\nsecond {x}"')
    assert multi.first_line_pattern == "first line" and multi.literals == ["first line"]


# -- the miner, on a fake release -------------------------------------------------------
FAKE_SERVER_ARGS = """
class ServerArgs:
    @property
    def uses_spec(self):
        return self.speculative_algorithm is not None

    def _check(self):
        if self.uses_spec and self.enable_dp_attention:
            raise ValueError("Currently spec does not support dp attention.")
        topk = self.speculative_eagle_topk
        assert topk is None or topk > 0, f"bad topk {topk}"
        if getattr(self, "page_size", 1) > 1:
            raise NotImplementedError

    @classmethod
    def from_cli_args(cls, args):
        args.tp_size = args.tensor_parallel_size
"""
FAKE_HOOK = """
from sglang.srt.runtime_context import dp_enabled_of

def handle(server_args):
    cfg = resolving_view(server_args)
    if dp_enabled_of(cfg) and cfg.tp_size % 2:
        raise ValueError(f"{cfg.tp_size} must be divisible by 2")
    if cfg.device == "cpu":
        if cfg.mystery:
            raise RuntimeError("no flag here")
"""
FAKE_RUNTIME = "def dp_enabled_of(cfg):\n    return cfg.attn_dp_size > 1\n"
FAKE_FLAGS = {
    "sglang_version": "9.9.9",
    "options": [
        {"option_strings": ["--speculative-algorithm"], "dest": "speculative_algorithm"},
        {"option_strings": ["--enable-dp-attention"], "dest": "enable_dp_attention"},
        {"option_strings": ["--speculative-eagle-topk"], "dest": "speculative_eagle_topk"},
        {"option_strings": ["--page-size"], "dest": "page_size"},
        {"option_strings": ["--tensor-parallel-size", "--tp-size"], "dest": "tensor_parallel_size",
         "type": "int", "default": 1},
        {"option_strings": ["--attn-dp-size"], "dest": "attn_dp_size"},
        {"option_strings": ["--device"], "dest": "device"},
    ],
}  # fmt: skip


@pytest.fixture(scope="module")
def fake_catalog(tmp_path_factory: pytest.TempPathFactory) -> dict:
    package = tmp_path_factory.mktemp("release") / "sglang"
    (package / "srt" / "arg_groups").mkdir(parents=True)
    (package / "_version.py").write_text('__version__ = "9.9.9"\n')
    (package / "srt" / "server_args.py").write_text(FAKE_SERVER_ARGS)
    (package / "srt" / "arg_groups" / "x_hook.py").write_text(FAKE_HOOK)
    (package / "srt" / "runtime_context.py").write_text(FAKE_RUNTIME)
    assert package_version(package) == "9.9.9"
    return build_error_catalog(package, FAKE_FLAGS)


def _entry(catalog: dict, text: str) -> dict:
    found = [e for e in catalog["entries"] if text in e["message"]]
    assert len(found) == 1, (text, found)
    return found[0]


def test_miner_follows_properties_locals_getattr_views_helpers_and_aliases(
    fake_catalog: dict,
) -> None:
    spec = _entry(fake_catalog, "spec does not support dp")
    assert spec["function"] == "ServerArgs._check" and spec["kind"] == "raise"
    assert spec["condition"] == "self.uses_spec and self.enable_dp_attention"
    assert spec["flags"] == ["--enable-dp-attention", "--speculative-algorithm"]  # via the property
    topk = _entry(fake_catalog, "bad topk")
    assert topk["exception"] == "AssertionError" and topk["condition_flags"] == [
        "--speculative-eagle-topk"
    ]
    bare = next(e for e in fake_catalog["entries"] if e["exception"] == "NotImplementedError")
    assert bare["message"] == "" and bare["flags"] == ["--page-size"]  # getattr(self, "page_size")
    hook = _entry(fake_catalog, "must be divisible by 2")
    # cfg is a resolving view; dp_enabled_of(cfg) is followed one level; tp_size is an alias
    assert hook["condition_flags"] == ["--attn-dp-size", "--tensor-parallel-size"]
    assert hook["pattern"] == r"-?\d+(?:\.\d+)? must be divisible by 2"
    nested = _entry(fake_catalog, "no flag here")
    assert nested["condition_reads"] == ["mystery"] and nested["condition_flags"] == []
    assert nested["context"] == ["cfg.device == 'cpu'"] and nested["context_flags"] == ["--device"]
    assert all(set(e) == ENTRY_KEYS for e in fake_catalog["entries"])


# -- the shipped catalogs ---------------------------------------------------------------
def test_every_flag_catalog_has_an_error_catalog() -> None:
    assert shipped_error_versions() == shipped_versions()


@pytest.mark.parametrize("version", shipped_versions())
def test_shipped_catalog_is_deterministic_and_well_formed(version: str) -> None:
    text = (CATALOGS / f"errors-{version}.json").read_text(encoding="utf-8")
    data = json.loads(text)
    assert dumps(data) == text  # the builder's own serialisation: sorted keys, stable order
    assert data["sglang_version"] == version == data["flag_catalog"]
    entries = data["entries"]
    assert len(entries) > 300
    assert entries == sorted(
        entries, key=lambda e: (e["file"], e["line"], e["end_line"], e["kind"])
    )
    for entry in entries:
        assert ENTRY_KEYS <= set(entry) <= ENTRY_KEYS | {"first_line_pattern"}, entry
        assert entry["kind"] in ("raise", "assert", "log_exit")
        assert entry["line"] <= entry["end_line"]
        assert set(entry["condition_flags"]) <= set(entry["flags"]) or not entry["condition_flags"]
        assert all(flag.startswith("--") for flag in entry["flags"])
        re.compile(entry["pattern"])
        assert all(
            lit in entry["message"].replace("{{", "{").replace("}}", "}")
            for lit in entry["literals"]
        )


def test_startup_sites_resolve_to_flags() -> None:
    """Done-when figure: >= 95% of 0.5.23's startup sites whose condition reads a server
    argument name at least one flag (printed for docs/catalogs.md)."""
    for version in shipped_error_versions():
        figure = flag_resolution(load_error_catalog(version))
        print(
            f"sglang {version}: {len(load_error_catalog(version).entries)} entries, "
            f"{figure.sites} startup sites, {figure.reading} read a server argument, "
            f"{figure.resolved} resolve to a flag ({figure.share:.1%})"
        )
    figure = flag_resolution(load_error_catalog("0.5.23"))
    assert figure.reading >= 600
    assert figure.share >= 0.95, figure


def test_docs_state_each_releases_flag_resolution() -> None:
    """The error-catalog table of docs/catalogs.md is the one this computes."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "catalogs.md").read_text("utf-8")
    for version in shipped_error_versions():
        catalog = load_error_catalog(version)
        figure = flag_resolution(catalog)
        row = (
            f"| {version} | {len(catalog.entries)} | {figure.sites} | {figure.reading}"
            f" | {figure.resolved} ({figure.share:.1%}) |"
        )
        assert row in page, row


def test_known_entry_matches_its_message() -> None:
    catalog = load_error_catalog("0.5.23")
    (site,) = catalog.match("ValueError", STANDALONE_DP)
    assert site.file == "srt/arg_groups/speculative_hook.py"
    assert site.function == "_handle_eagle_family"
    assert site.condition_flags == ("--attn-dp-size", "--speculative-algorithm")
    assert "STANDALONE" in site.condition
    assert catalog.match("KeyError", STANDALONE_DP) == []
    assert catalog.match("sglang.srt.x.ValueError", "  " + STANDALONE_DP + "  ") == [site]


def test_a_bare_module_name_is_the_raising_modules_own() -> None:
    # server_args.__getattr__: `module {__name__!r} has no attribute {name!r}` speaks of
    # sglang.srt.server_args only, not of any module's missing attribute
    body = ast.parse('f"module {__name__!r} has no attribute {name!r}"', mode="eval").body
    template = template_of(body, {}, module="sglang.srt.server_args")
    assert re.fullmatch(template.pattern, "module 'sglang.srt.server_args' has no attribute 'x'")
    assert not re.fullmatch(template.pattern, "module 'torch' has no attribute 'x'")
    catalog = load_error_catalog("0.5.23")
    other = "module 'sglang.srt.layers.quantization.deep_gemm_wrapper' has no attribute 'get_x'"
    assert catalog.match("AttributeError", other) == []
    (site,) = catalog.match(
        "AttributeError", "module 'sglang.srt.server_args' has no attribute 'FooParser'"
    )
    assert site.function == "__getattr__"


def test_a_message_that_moved_is_matched_in_both_releases() -> None:
    old = load_error_catalog("0.5.6.post2").match("AssertionError", EP_TP)
    new = load_error_catalog("0.5.23").match("AssertionError", EP_TP)
    assert [s.file for s in old] == ["srt/server_args.py"]
    assert {s.file for s in new} == {"srt/arg_groups/moe_hook.py"}
    # each release names the flags its own parser spells (0.5.6's dest is tensor_parallel_size)
    assert old[0].condition_flags == ("--expert-parallel-size", "--tensor-parallel-size")
    assert all(s.condition_flags == ("--ep-size", "--tp-size") for s in new)


def test_bare_assertion_is_found_by_its_frame() -> None:
    catalog = load_error_catalog("0.5.23")
    frame = "/usr/lib/python3/site-packages/sglang/srt/arg_groups/speculative_hook.py"
    site = catalog.site_at(frame, 1162, "_handle_eagle_family")
    assert site is not None and site.kind == "assert" and site.message == ""
    assert site.condition_flags == ("--speculative-eagle-topk", "--speculative-num-draft-tokens")
    assert "--speculative-num-steps" in site.context_flags
    assert catalog.site_at(frame, 1162, "another_function") is None
    assert catalog.site_at("srt/server_args.py", 1) is None


def test_most_specific_match_first_and_fields_typed() -> None:
    catalog = load_error_catalog("0.5.23")
    found = catalog.match(None, "tp_size must be divisible by moe_dp_size")
    assert found and found[0].flags == ("--moe-dp-size", "--tp-size")
    assert [s.specificity for s in found] == sorted((s.specificity for s in found), reverse=True)


def test_prefilter_keeps_hundreds_of_matchers_cheap() -> None:
    catalog = ErrorCatalog.from_json(json.loads((CATALOGS / "errors-0.5.23.json").read_text()))
    lines = [f"INFO 12-03 10:00:{i % 60:02d} Decode batch. #running-req: {i}" for i in range(5000)]
    start = time.perf_counter()
    assert not any(catalog.match("ValueError", line) for line in lines)
    assert catalog.match("ValueError", STANDALONE_DP)
    elapsed = time.perf_counter() - start
    print(f"5000 non-matching lines + 1 match: {elapsed * 1000:.0f} ms")
    assert elapsed < 2.0


def test_unknown_version_falls_back_to_the_nearest_older_release() -> None:
    assert load_error_catalog("0.5.20").version == "0.5.19"
    assert load_error_catalog().version == shipped_error_versions()[-1]
    with pytest.raises(ErrorCatalogError):
        load_error_catalog("0.4.0")


def test_cli_lists_entries() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "analyzer", "catalog", "errors", "--grep", "standalone speculative decoding does not support dp"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    )  # fmt: skip
    assert "srt/arg_groups/speculative_hook.py:1082 _handle_eagle_family" in out.stdout
    assert "flags: --attn-dp-size --speculative-algorithm" in out.stdout
    missing = subprocess.run(
        [sys.executable, "-m", "analyzer", "catalog", "errors", "--grep", "no such text anywhere"],
        cwd=ROOT, capture_output=True, text=True,
    )  # fmt: skip
    assert missing.returncode == 1 and "0 of" in missing.stdout


# -- with a real SGLang -----------------------------------------------------------------
@pytest.mark.sglang
def test_build_from_installed_release_matches_committed(tmp_path: Path) -> None:
    python = os.environ.get("LOGANALYZE_SGLANG_PYTHON")
    if not python:
        pytest.skip("LOGANALYZE_SGLANG_PYTHON is not set")
    out = tmp_path / "errors.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-m", "analyzer.sglang.error_catalog_build", "--python", python, "-o", str(out)],
        cwd=ROOT, env=env, check=True, capture_output=True, timeout=900,
    )  # fmt: skip
    built = json.loads(out.read_text(encoding="utf-8"))
    version = built["sglang_version"]
    committed = CATALOGS / f"errors-{version}.json"
    assert out.read_text(encoding="utf-8") == committed.read_text(encoding="utf-8")
    if version == "0.5.23":
        (site,) = ErrorCatalog.from_json(built).match("ValueError", STANDALONE_DP)
        assert site.condition_flags == ("--attn-dp-size", "--speculative-algorithm")


def test_messages_find_the_same_sites_before_and_after_the_automaton_is_built(monkeypatch):
    """A few messages are searched literal by literal, later ones by Aho-Corasick: the
    candidates must not depend on which."""
    from analyzer.sglang import error_catalog

    shipped = load_error_catalog("0.5.23")
    messages = [re.sub(r"\{[^{}]*\}", "7", s.message) for s in shipped.entries[::7]]
    messages += ["x" * 3000, "", "no SGLang said this"]
    by_mode = {}
    for limit in (10**9, 2000, 0):  # never build it; build it midway; at once
        monkeypatch.setattr(error_catalog, "PLAIN_SEARCH_CHARS", limit)
        catalog = ErrorCatalog(shipped.version, shipped.entries, shipped.flag_catalog)
        by_mode[limit] = [catalog._candidates(m) for m in messages]
        assert (catalog._prefilter is None) == (limit == 10**9)
    assert by_mode[0] == by_mode[2000] == by_mode[10**9]
    assert sum(map(len, by_mode[0])) > len(messages) / 2  # the messages do find their sites

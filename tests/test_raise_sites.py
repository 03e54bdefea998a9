"""Raise sites: from an exception to the SGLang statement that raised it, its family's
class, the condition quoted and the flags it reads (analyzer/blame/raise_sites.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.blame.raise_sites import find_site
from analyzer.core.model import Frame, Line, Traceback
from analyzer.pipeline import Options, analyze
from analyzer.rulebook.raise_site_rules import family_of, site_families
from analyzer.rulebook.vocabulary import compile_patterns, load_rules
from analyzer.sglang.error_catalog import ErrorSite, load_error_catalog
from benchmarks.raise_site_score import real_cases, score
from tests.fixture_cases import FIXTURES

EP_TP = "The expert parallel size must be 1 or the same as the tensor parallel size"
PACKAGE = "/opt/venv/lib/python3.11/site-packages/sglang/"
CASES = [(f, c) for f in site_families() for c in f.cases]


def _site(version: str, where: str) -> ErrorSite:
    file, line = where.rsplit(":", 1)
    return next(
        s for s in load_error_catalog(version).entries if (s.file, s.line) == (file, int(line))
    )


@pytest.mark.parametrize("family,case", CASES, ids=[f"{f.id}-{c.site}-{c.fires}" for f, c in CASES])
def test_every_family_claims_its_case_and_not_its_negative(family, case):
    found = family_of(_site(case.version, case.site))
    assert (found is not None and found.id == family.id) == case.fires, found


def test_every_family_has_a_case_that_fires_and_one_that_does_not():
    for family in site_families():
        assert {c.fires for c in family.cases} == {True, False}, family.id


def test_shipped_rule_patterns_compile_though_they_are_compiled_lazily():
    for rule in load_rules():
        compile_patterns(rule)


def test_a_bad_user_pattern_is_refused_at_load(tmp_path: Path):
    from analyzer.rulebook.vocabulary import RuleError

    (tmp_path / "bad.toml").write_text(
        'id = "bad"\nclass = "x"\ntitle = "t"\nseverity = "fatal"\ntriggers = ["a"]\n'
        'patterns = ["(unclosed"]\n[doc]\ndetects = "d"\nwhy = "w"\nfix = "f"\n'
    )
    with pytest.raises(RuleError, match="bad pattern"):
        load_rules([str(tmp_path)])


def _lone_exception(text: str) -> Traceback:
    """An exception line with no frames (a bare exception line, a headless traceback)."""
    line = Line("x.log", 7, text, text)
    exception_type, _, message = text.partition(": ")
    return Traceback((line,), (), exception_type, message)


def test_an_exception_line_without_frames_is_placed_by_its_message():
    errors = load_error_catalog("0.5.23")
    found = find_site(_lone_exception(f"AssertionError: {EP_TP}"), errors)
    assert found is not None and found.found_by == "message"
    assert found.site.file == "srt/arg_groups/moe_hook.py"
    assert found.family is not None and found.family.rule_class == "config_validation"
    # a bare assertion with no frame has nothing to be placed by: no site, no error
    assert find_site(_lone_exception("AssertionError"), errors) is None
    # messages with next to no fixed text (`{a}: {b}`) place nothing
    assert find_site(_lone_exception("ValueError: a: b"), errors) is None


def test_an_older_releases_shorter_message_is_placed_with_its_function():
    """0.4 asserted `multi-node data parallel is not supported`; 0.5.x appended `unless dp
    attention!` to the same check. With the raising frame's function that is the site."""
    errors = load_error_catalog("0.5.13")
    older = "multi-node data parallel is not supported"
    (site,) = errors.place("AssertionError", older, "check_server_args")
    assert site.function == "ServerArgs.check_server_args"
    assert "--enable-dp-attention" in site.condition_flags
    assert errors.place("AssertionError", older) == []  # no frame: the message alone
    assert errors.place("AssertionError", older, "__post_init__") == []
    assert errors.place("AssertionError", older[:-3], "check_server_args") == []  # mid-word
    assert errors.place("AssertionError", "multi-node data", "check_server_args") == []
    assert errors.place("ValueError", older, "check_server_args") == []


def test_a_message_only_older_releases_raise_names_the_release(tmp_path: Path):
    """An exception line alone, with no other clue: the releases that raise that message."""
    log = tmp_path / "tail.log"
    log.write_text(
        "ValueError: TRTLLM MHA backend for prefill is only supported on Blackwell GPUs "
        "(SM100). Please use a different prefill backend.\n"
    )
    command = "python -m sglang.launch_server --model-path m --prefill-attention-backend trtllm_mha"
    report = analyze([str(log)], Options(command=command))
    assert report.catalog_version == "0.5.13"
    assert "0.5.10.post1, 0.5.13 raises" in report.inputs[0].catalog_reason
    root = report.incidents[0]
    assert root.rule_class == "config_validation"
    assert root.raise_site is not None and root.raise_site.file == "sglang/srt/server_args.py"
    assert root.offending_flags == ["--prefill-attention-backend"]
    # a message the newest release raises keeps the newest catalog, other catalogs unread
    log.write_text(f"AssertionError: {EP_TP}\n")
    assert analyze([str(log)]).catalog_version == "0.5.23"


def test_a_message_is_placed_only_in_the_file_that_raised_it():
    # server_args.__getattr__ words its AttributeError as Python does for any module, but
    # `{__name__!r}` there is always 'sglang.srt.server_args': another module's is not its
    errors = load_error_catalog("0.5.23")
    message = "module 'torch.compiler' has no attribute 'is_compiling'"
    alone = find_site(_lone_exception(f"AttributeError: {message}"), errors)
    assert alone is None or alone.site.file != "srt/server_args.py"
    own = "module 'sglang.srt.server_args' has no attribute 'FooParser'"
    placed = find_site(_lone_exception(f"AttributeError: {own}"), errors)
    assert placed is not None and placed.site.file == "srt/server_args.py"
    raised = Line("x.log", 9, f"AttributeError: {message}", f"AttributeError: {message}")
    frame = Frame(f"{PACKAGE}srt/utils/custom_op.py", 136, "<module>", "_is_compiling = ...")
    elsewhere = Traceback((raised,), (frame,), "AttributeError", message)
    found = find_site(elsewhere, errors)
    assert found is None or found.site.file != "srt/server_args.py"


def test_a_bare_assertion_is_placed_by_its_frame_in_its_own_release():
    report = analyze([str(FIXTURES / "real" / "spec_eagle3_topk_without_steps.log")])
    root = report.incidents[0]
    assert root.raise_site is not None
    assert root.raise_site.file == "sglang/srt/arg_groups/speculative_hook.py"
    assert root.raise_site.function == "_handle_eagle_family"
    assert root.raise_site.line == 1160  # the assert spans 1160-1163; the frame says 1162
    assert "cfg.speculative_eagle_topk is None" in root.raise_site.condition
    assert (
        "Raised at sglang/srt/arg_groups/speculative_hook.py:1160 in _handle_eagle_family: "
        "the assertion `cfg.speculative_eagle_topk is None" in root.explanation
    )
    older = analyze([str(FIXTURES / "versions" / "sglang-0.5.13_eagle_topk_without_steps.log")])
    assert older.catalog_version == "0.5.13"
    site = older.incidents[0].raise_site
    assert site is not None and (site.file, site.line) == (
        "sglang/srt/arg_groups/speculative_hook.py",
        341,
    )


def _traceback_log(tmp_path: Path, name: str, site: ErrorSite, message: str, command: str = ""):
    """A log ending in a traceback whose innermost frame is `site` (the release's own file,
    line and function, so the release is told from the frame as from a real log)."""
    function = site.function.rsplit(".", 1)[-1]
    lines = [
        *(["$ " + command] if command else []),
        "Traceback (most recent call last):",
        f'  File "{PACKAGE}{site.file}", line {site.line}, in {function}',
        "    raise",
        f"{site.exception}: {message}".rstrip(": "),
    ]
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_message_that_moved_between_releases_is_placed_in_both(tmp_path: Path):
    old_site = load_error_catalog("0.5.6.post2").match("AssertionError", EP_TP)[0]
    new_site = load_error_catalog("0.5.23").match("AssertionError", EP_TP)[0]
    assert old_site.file != new_site.file  # it moved: server_args.py -> arg_groups/moe_hook.py
    found = {}
    for version, site in (("0.5.6.post2", old_site), ("0.5.23", new_site)):
        log = _traceback_log(tmp_path, f"{version}.log", site, EP_TP)
        command = "python -m sglang.launch_server --model-path m --tp-size 4 --ep-size 2"
        report = analyze([str(log)], Options(command=command))
        assert report.catalog_version == version, report.inputs[0].catalog_reason
        root = report.incidents[0]
        assert root.rule_class == "config_validation"
        assert root.raise_site is not None
        found[version] = (root.raise_site.file, root.raise_site.line)
        assert root.raise_site.condition == site.condition
        assert f"because `{site.condition}`" in root.explanation or "assertion" in root.explanation
        # one spelling whichever release logged it, the newest's (0.5.6's first option
        # string is --tensor-parallel-size; it accepts --tp-size too)
        assert {"--tp-size", "--ep-size"} <= set(root.offending_flags)
        assert "--tensor-parallel-size" not in root.offending_flags
    assert found == {
        "0.5.6.post2": ("sglang/srt/server_args.py", old_site.line),
        "0.5.23": ("sglang/srt/arg_groups/moe_hook.py", new_site.line),
    }


PAGE_SIZE = "page_size must be multiple of 128 for compressed attention"


def test_an_error_no_rule_knows_is_classed_by_its_family(tmp_path: Path):
    site = load_error_catalog("0.5.23").match("AssertionError", PAGE_SIZE)[0]
    command = "python -m sglang.launch_server --model-path m --page-size 64 --tp-size 2"
    log = _traceback_log(tmp_path, "pool.log", site, PAGE_SIZE, command)
    report = analyze([str(log)])
    root = report.incidents[0]
    assert (root.rule_class, root.rule) == ("config_validation", "raise-site:memory-pool-config")
    assert root.offending_flags == ["--page-size"]  # set by the command and read by the condition
    assert "the assertion `page_size % 128 == 0` failed" in root.explanation
    assert root.raise_site is not None and root.raise_site.file.endswith("pool_configurator.py")
    # the command does not set it: the condition read it, but the default did not cause it
    unset = _traceback_log(
        tmp_path, "unset.log", site, PAGE_SIZE, command.replace(" --page-size 64", "")
    )
    assert analyze([str(unset)]).incidents[0].offending_flags == []
    # no command at all: the condition's own flags
    bare = _traceback_log(tmp_path, "bare.log", site, PAGE_SIZE)
    assert analyze([str(bare)]).incidents[0].offending_flags == ["--page-size"]


def test_an_error_outside_sglang_stays_unknown(tmp_path: Path):
    path = tmp_path / "other.log"
    path.write_text(
        "Traceback (most recent call last):\n"
        '  File "/opt/app/worker.py", line 12, in run\n'
        "    assert page_size % 128 == 0\n"
        "AssertionError\n"
    )
    root = analyze([str(path)]).incidents[0]
    assert root.rule_class == "unknown" and root.raise_site is None


def test_real_failures_meet_the_class_and_flag_goals():
    shipped, alone = score(real_cases())
    print(shipped.line("analyzer as shipped"))
    print(alone.line("error catalog alone"))
    assert shipped.cases >= 60 and shipped.flag_cases >= 40
    assert shipped.class_share >= 0.97
    assert shipped.flag_share >= 0.95
    # the families alone class every real failure whose raise site the catalog finds
    assert alone.cases >= 12 and alone.class_share >= 0.97


def test_docs_state_each_releases_coverage():
    from analyzer.rulebook.raise_site_rules import coverage
    from analyzer.sglang.error_catalog import shipped_error_versions
    from tests.fixture_cases import ROOT

    page = (ROOT / "docs" / "blame.md").read_text("utf-8")
    for version in shipped_error_versions():
        entries = load_error_catalog(version).entries
        every = coverage(entries)
        startup = coverage(tuple(s for s in entries if s.startup))
        row = (
            f"| {version} | {every.entries} | {every.classed} ({every.classed / every.entries:.1%})"
            f" | {every.classed_with_flag} ({every.share:.1%}) | {startup.entries}"
            f" | {startup.classed_with_flag} ({startup.share:.1%}) |"
        )
        print(row)
        assert row in page


OLDER_WORDING = (
    "ValueError: TensorRT-LLM MLA backend only supports kv-cache-dtype of fp8_e4m3, fp4_e2m1, "
    "bf16, or auto."
)  # 0.5.10-0.5.19's text; 0.5.23 words it without fp4_e2m1


def test_a_message_of_an_older_release_is_placed_when_the_input_names_no_release(tmp_path):
    log = tmp_path / "tail.txt"
    log.write_text(OLDER_WORDING + "\n")
    report = analyze([str(log)], Options())
    root = report.incidents[0]
    assert (root.rule_class, root.raise_site.function) == ("config_validation", "_mla_kv_cache_dtype_checks")
    # the message chose the release that judged the input (the input says so)
    assert report.inputs[0].catalog_version == "0.5.19"
    assert "the exception message is one sglang" in report.inputs[0].catalog_reason
    # a release the input states is believed: its catalog alone judges the message
    log.write_text("sglang==0.5.23\n" + OLDER_WORDING + "\n")
    root = analyze([str(log)], Options()).incidents[0]
    assert root.rule_class == "unknown" and root.raise_site is None

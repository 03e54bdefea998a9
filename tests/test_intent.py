"""Silent misconfigurations (issue 11): SGLang runs, but not what the command asked for.

The fixtures (fixtures/real/intent_* from real CPU runs, fixtures/source/intent_* written after
SGLang's source) list the warnings they must give in `[[warnings]]` tables; the launch-command
checks are also exercised alone, before any launch (log None), as `loganalyze run`'s pre-flight
will call them.
"""

from __future__ import annotations

import json

import pytest

from analyzer.core.model import InputSummary, Line, Match
from analyzer.engine.scan import scan_lines
from analyzer.formats.json_report import render_json
from analyzer.pipeline import Options, analyze
from analyzer.repair.correct import CommandChoice, propose
from analyzer.repair.fix_registry import FIXES
from analyzer.repair.fixes import FixContext
from analyzer.repair.intent_fixes import attention_dp_plan, replace_deprecated
from analyzer.rulebook.check_rules import CHECK_RULES
from analyzer.rulebook.command_checks import check_command
from analyzer.rulebook.vocabulary import load_rules
from analyzer.sglang.catalog import load_catalog
from analyzer.sglang.catalog_check import validate
from analyzer.sglang.launch_command import parse_launch_command
from tests.fixture_cases import FIXTURES, fixture_cases

CATALOG = load_catalog()
RULES = {rule.id: rule for rule in load_rules()}
LAUNCH = "python -m sglang.launch_server --model-path /models/Llama-3.1-8B-Instruct"
INTENT = [c for c in fixture_cases() if c.sidecar.stem.startswith("intent_")]
WITH_WARNINGS = [c for c in INTENT if "warnings" in c.data]


def _warnings_of(case) -> list[dict]:
    return case.data["warnings"]


def _report(case):
    return analyze([str(case.input)], Options(command=case.user_command))


def _check(args: str, log=None, server_args=None):
    command = parse_launch_command(f"{LAUNCH} {args}", CATALOG.takes_value)
    assert command is not None
    return check_command(command, CATALOG, server_args, log)


def _corrected(finding, args: str, server_args=None) -> str | None:
    command = parse_launch_command(f"{LAUNCH} {args}", CATALOG.takes_value)
    rule = CHECK_RULES[finding.match.rule_id]
    return propose(finding, rule, CommandChoice(command, "user"), CATALOG, server_args).corrected


# ---- fixtures -------------------------------------------------------------------------------


def test_there_are_real_and_source_intent_fixtures():
    origins = {c.fixture["origin"] for c in INTENT}
    assert {"real", "source"} <= origins
    assert len([c for c in INTENT if c.fixture["origin"] == "real"]) >= 10


@pytest.mark.parametrize("case", WITH_WARNINGS, ids=[c.id for c in WITH_WARNINGS])
def test_real_fixture_gives_each_expected_warning(case):
    report = _report(case)
    got = [i for i in report.incidents if i.severity == "warning"]
    for expected in _warnings_of(case):
        same = [
            i
            for i in got
            if i.rule == expected["rule"]
            and i.offending_flags == expected["flags"]
            and i.corrected_command == expected.get("corrected_command")
        ]
        assert same, (expected, [(i.rule, i.offending_flags, i.corrected_command) for i in got])
        assert expected.get("verified", True) is True, "SGLang rejected the corrected command"
    assert len(got) == len(_warnings_of(case)), [i.rule for i in got]


@pytest.mark.parametrize("case", INTENT, ids=[c.id for c in INTENT])
def test_warnings_come_after_the_fatal_incidents(case):
    report = _report(case)
    severities = [i.severity for i in report.incidents]
    assert "warning" in severities
    first_warning = severities.index("warning")
    assert all(s == "warning" for s in severities[first_warning:]), severities
    order = [i["severity"] for i in json.loads(render_json(report))["incidents"]]
    assert order == severities


@pytest.mark.parametrize("case", INTENT, ids=[c.id for c in INTENT])
def test_every_warning_names_the_flag_and_what_sglang_did(case):
    for incident in _report(case).incidents:
        if incident.severity != "warning":
            continue
        assert incident.offending_flags and all(
            f.startswith("--") for f in incident.offending_flags
        )
        assert incident.explanation and incident.evidence
        assert all("\x1b" not in line.text for line in incident.evidence)


def test_healthy_logs_give_no_warning():
    """The first negatives are quiet runs: nothing at all. The neg_* corpus holds runs with
    deprecated flags, shutdown noise and client failures: warnings and info findings are
    legitimate there, never a fatal or error incident, and a lowered one says why."""
    negatives = [c for c in fixture_cases() if c.sidecar.parent == FIXTURES / "negative"]
    quiet = [c for c in negatives if not c.sidecar.stem.startswith("neg_")]
    assert quiet and len(negatives) - len(quiet) >= 40
    for case in quiet:
        assert [i.rule for i in _report(case).incidents] == [], case.id
    rules = {r.id: r for r in load_rules()}
    for case in negatives:
        for incident in _report(case).incidents:
            assert incident.severity in ("warning", "info"), (case.id, incident.rule)
            own = rules.get(incident.rule)
            if own is not None and own.severity in ("fatal", "error"):
                assert any(why in incident.explanation for why in LOWERED), (case.id, incident.rule)


LOWERED = ("The server survived it", "shutdown noise", "the client's error")


def test_the_yellow_deprecation_line_is_matched_without_its_colour_codes():
    case = next(c for c in INTENT if c.sidecar.stem == "intent_deprecated_disable_cuda_graph")
    assert "\x1b[1;33m'--disable-cuda-graph'" in case.input.read_text("utf-8")
    warning = next(i for i in _report(case).incidents if i.rule == "deprecated-flag")
    start, end = warning.span
    decisive = next(ln for ln in warning.evidence if ln.number == warning.line)
    assert decisive.text[start:end].startswith("'--disable-cuda-graph' is deprecated")


def test_corrected_commands_of_the_checks_are_clean_when_checked_again():
    """A check's corrected command says what runs: checking it again finds nothing more."""
    for case in INTENT:
        for incident in _report(case).incidents:
            if incident.rule not in CHECK_RULES or incident.corrected_command is None:
                continue
            corrected = parse_launch_command(incident.corrected_command, CATALOG.takes_value)
            again = check_command(corrected, CATALOG, None, None)
            assert incident.rule not in [f.match.rule_id for f in again], case.id


# ---- the checks alone (pre-flight: no log) ----------------------------------------------------


def test_prefixes_are_spelled_out():
    findings = _check("--tp 2 --mem-frac 0.8")
    assert [f.match.rule_id for f in findings] == ["flag-prefix-expanded"]
    assert findings[0].flags == ["--tp-size", "--mem-fraction-static"]
    assert _corrected(findings[0], "--tp 2 --mem-frac 0.8") == (
        f"{LAUNCH} --tp-size 2 --mem-fraction-static 0.8"
    )


def test_dp_prefix_is_replicas_not_attention_dp():
    findings = _check("--tp 8 --dp 8")
    dp = next(f for f in findings if f.match.rule_id == "dp-means-replicas")
    assert "8 data-parallel replicas" in dp.explanation and "64 GPUs" in dp.explanation
    assert any("--attn-dp-size 8" in a for a in dp.advice)
    prefix = next(f for f in findings if f.match.rule_id == "flag-prefix-expanded")
    assert prefix.flags == ["--tp-size"]
    assert _check("--tp-size 8 --dp-size 8") == []


def test_context_length_suffix_is_powers_of_ten():
    (finding,) = _check("--context-length 128k")
    assert finding.title == "--context-length 128k means 128000, not 131072"
    assert _corrected(finding, "--context-length 128k") == f"{LAUNCH} --context-length 131072"
    assert _check("--context-length 131072") == []


def test_enable_dp_attention_without_dp_size_does_nothing():
    (finding,) = _check("--tp-size 8 --enable-dp-attention")
    assert finding.match.rule_id == "dp-attention-off"
    assert _corrected(finding, "--tp-size 8 --enable-dp-attention") == (
        f"{LAUNCH} --tp-size 8 --attn-dp-size 8"
    )
    assert _check("--tp-size 8 --dp-size 8 --enable-dp-attention") == []


def test_mem_fraction_percentage():
    (finding,) = _check("--mem-fraction-static 90")
    assert _corrected(finding, "--mem-fraction-static 90") == f"{LAUNCH} --mem-fraction-static 0.9"
    (recorded,) = _check("", server_args={"mem_fraction_static": 250.0})
    assert recorded.edits == [], "no percentage reading of 250"
    assert _check("--mem-fraction-static 0.9") == []


def test_lowercase_algorithm():
    (finding,) = _check("--speculative-algorithm eagle3 --speculative-draft-model-path /d")
    assert finding.title == "--speculative-algorithm eagle3 ran as EAGLE3"
    assert _check("--speculative-algorithm not-a-name --speculative-draft-model-path /d") == []


SPEC = "--speculative-algorithm EAGLE3 --speculative-draft-model-path /d"


def test_draft_tokens_cut_is_predicted_before_a_launch():
    args = f"{SPEC} --speculative-num-steps 3 --speculative-eagle-topk 1 "
    (finding,) = _check(args + "--speculative-num-draft-tokens 16")
    assert finding.match.rule_id == "spec-draft-tokens-cut"
    assert _corrected(finding, args + "--speculative-num-draft-tokens 16").endswith(
        "--speculative-num-draft-tokens 4"
    )
    assert _check(args + "--speculative-num-draft-tokens 4") == []
    log = scan_lines(
        InputSummary("x.log"),
        [
            "[t] speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
            "speculative_eagle_topk == 1"
        ],
        ["is adjusted to speculative_num_steps"],
    )
    assert _check(args + "--speculative-num-draft-tokens 16", log=log) == [], "the rule says it"


@pytest.mark.parametrize(
    ("architecture", "algorithm", "wanted"),
    [("LlamaForCausalLMEagle3", "EAGLE", "EAGLE3"), ("LlamaForCausalLMEagle", "EAGLE3", "EAGLE")],
)
def test_draft_architecture_from_config_json(tmp_path, architecture, algorithm, wanted):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": [architecture]}))
    args = f"--speculative-algorithm {algorithm} --speculative-draft-model-path {tmp_path}"
    (finding,) = _check(args)
    assert finding.match.rule_id == "draft-algorithm-mismatch"
    assert architecture in finding.explanation and "near 1.00" in finding.explanation
    assert _corrected(finding, args).endswith(
        f"--speculative-algorithm {wanted} --speculative-draft-model-path {tmp_path}"
    )
    matching = f"--speculative-algorithm {wanted} --speculative-draft-model-path {tmp_path}"
    assert _check(matching) == []


def test_unreadable_draft_without_a_log_is_not_guessed():
    assert _check("--speculative-algorithm EAGLE --speculative-draft-model-path /nonexistent") == []


def test_auto_params_need_the_record():
    assert _check(SPEC) == [], "before a launch SGLang's choice is not known"


def test_healthy_command_has_no_finding():
    case = next(c for c in fixture_cases() if c.sidecar.stem == "healthy_speculative_eagle3")
    command = parse_launch_command(case.fixture["command"], CATALOG.takes_value)
    assert check_command(command, CATALOG, None, None) == []


def test_bad_values_never_raise():
    for args in ("--mem-fraction-static lots", "--context-length k", "--dp x", "--tp-size ''"):
        _check(args)


# ---- the rule fixes ---------------------------------------------------------------------------


def _finding(rule_id: str, body: str):
    from analyzer.blame.link import link

    rule = RULES[rule_id]
    found = next(p.search(body) for p in rule.patterns if p.search(body))
    groups = {k: v for k, v in found.groupdict().items() if v is not None}
    line = Line("x.log", 1, body, body)
    return link(Match(rule_id, line, None, groups, (line,)), rule, CATALOG)


def _plan(rule_id: str, body: str, args: str):
    command = parse_launch_command(f"{LAUNCH} {args}", CATALOG.takes_value)
    finding = _finding(rule_id, body)
    return FIXES[RULES[rule_id].fix](finding, FixContext(command, CATALOG, None)), command


def test_brace_replacement_becomes_one_flag_each():
    body = (
        "'--disable-cuda-graph' is deprecated and will be removed in a future release. "
        "Use '--cuda-graph-backend-{decode,prefill}=disabled' instead."
    )
    plan, command = _plan("deprecated-flag", body, "--disable-cuda-graph --tp-size 2")
    corrected = command.apply(plan.edits, CATALOG.canonical)
    assert corrected.render() == (
        f"{LAUNCH} --tp-size 2 --cuda-graph-backend-decode disabled "
        "--cuda-graph-backend-prefill disabled"
    )
    assert validate(corrected, CATALOG) == []


def test_deprecated_value_alias_is_replaced():
    body = "The tool_call_parser 'glm45' is deprecated. Please use 'glm' instead."
    plan, command = _plan("deprecated-flag", body, "--tool-call-parser glm45")
    assert (
        command.apply(plan.edits, CATALOG.canonical).render() == f"{LAUNCH} --tool-call-parser glm"
    )


def test_deprecated_flag_not_in_the_command_gets_no_edit():
    body = "--grpc-mode is deprecated and will be removed in a future version. Use --smg-grpc-mode."
    plan, _ = _plan("deprecated-flag", body, "--tp-size 2")
    assert plan.edits == []


def test_attention_dp_plan_keeps_the_width():
    command = parse_launch_command(
        f"{LAUNCH} --dp 4 --tp 4 --enable-dp-attention", CATALOG.takes_value
    )
    plan = attention_dp_plan(FixContext(command, CATALOG, None))
    assert command.apply(plan.edits, CATALOG.canonical).render() == (
        f"{LAUNCH} --attn-dp-size 4 --tp 4"
    )
    finding = _finding(
        "deprecated-flag",
        "'--enable-dp-attention' is deprecated and will be removed in a future release. "
        "Use '--attn-dp-size <dp-size>' instead.",
    )
    assert replace_deprecated(finding, FixContext(command, CATALOG, None)).edits == plan.edits


def test_typed_chunked_prefill_is_scaled_per_rank():
    body = "DP attention is enabled. chunked prefill size is adjusted from 8192 to 1024."
    plan, command = _plan("dp-attention-chunked-prefill", body, "--chunked-prefill-size 8192")
    assert command.apply(plan.edits, CATALOG.canonical).render() == (
        f"{LAUNCH} --chunked-prefill-size 65536"
    )


def test_adjusted_draft_tokens_read_the_record_or_the_rule():
    body = (
        "speculative_num_draft_tokens is adjusted to speculative_num_steps + 1 when "
        "speculative_eagle_topk == 1"
    )
    args = f"{SPEC} --speculative-num-steps 5 --speculative-eagle-topk 1 --speculative-num-draft-tokens 16"
    plan, _ = _plan("setting-adjusted", body, args)
    assert plan.edits[0].value == "6"
    assert any("tree" in note for note in plan.notes)


# ---- the pipeline around the warnings ---------------------------------------------------------


def _analyze_lines(tmp_path, lines: list[str], command: str | None = None):
    log = tmp_path / "run.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return analyze([str(log)], Options(command=command))


DEPRECATED = (
    "[2026-01-01 10:00:00] \x1b[1;33m'--disable-cuda-graph' is deprecated and will be removed "
    "in a future release. Use '--cuda-graph-backend-{decode,prefill}=disabled' instead.\x1b[0m"
)


def test_a_warning_does_not_hide_a_log_that_stops(tmp_path):
    # a log that just ends shows no death: it is where startup stopped (issue 19)
    report = _analyze_lines(
        tmp_path, [DEPRECATED, "[2026-01-01 10:00:05 TP0] Load weight begin. avail mem=78.10 GB"]
    )
    assert [i.rule_class for i in report.incidents] == ["startup_stall", "deprecated_flag"]
    assert report.verdict == "startup_stall"


def test_a_warning_does_not_hide_an_unknown_traceback(tmp_path):
    report = _analyze_lines(
        tmp_path,
        [
            DEPRECATED,
            "Traceback (most recent call last):",
            '  File "/x/app/worker.py", line 12, in event_loop',
            "    raise KeyError('x')",
            "KeyError: 'x'",
        ],
    )
    assert [i.rule_class for i in report.incidents] == ["unknown", "deprecated_flag"]


def test_several_checks_on_one_launch_line_are_all_reported(tmp_path):
    command = f"{LAUNCH} --tp 2 --dp 2 --context-length 4k --mem-fraction-static 85"
    report = _analyze_lines(tmp_path, [f"$ {command}", "[2026-01-01 10:00:00] starting"])
    rules = sorted(i.rule for i in report.incidents)
    assert rules == [
        "dp-means-replicas",
        "flag-prefix-expanded",
        "mem-fraction-above-one",
        "si-suffix-value",
    ]
    assert {i.line for i in report.incidents} == {1}
    assert all(i.command_source == "log" for i in report.incidents)


def test_fast_and_simple_scans_keep_the_same_weight_lines():
    case = next(c for c in INTENT if c.sidecar.stem == "intent_eagle3_draft_served_as_eagle")
    fast = render_json(analyze([str(case.input)], Options(command=case.user_command)))
    simple = render_json(
        analyze([str(case.input)], Options(command=case.user_command, simple_scan=True))
    )
    assert fast == simple
    assert "LlamaForCausalLMEagle3" in fast


# ---- rendered reports ---------------------------------------------------------------------------

SNAPSHOTS = ["real/intent_draft_tokens_adjusted", "source/intent_eagle3_draft_served_as_eagle"]


@pytest.mark.parametrize("name", SNAPSHOTS)
def test_rendered_reports(name, snapshot, monkeypatch):
    from analyzer.formats.terminal import render_plain
    from tests.fixture_cases import ROOT

    monkeypatch.chdir(ROOT)
    case = next(c for c in INTENT if c.id == name)
    report = analyze([str(case.input.relative_to(ROOT))], Options(command=case.user_command))
    assert render_plain(report) == snapshot
    assert render_json(report) == snapshot

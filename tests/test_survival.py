"""A healthy server is never reported dead: what it survived, and clients' failures."""

from __future__ import annotations

import pytest

from analyzer.pipeline import Options, analyze
from tests.fixture_cases import FIXTURES, fixture_cases

NEGATIVE = FIXTURES / "negative"
# one case per transcript format: a client failed while the server it talked to was healthy
CLIENT_FAILURES = {
    "claude": "neg_claude_bench_serving_missing_dataset",
    "codex": "neg_codex_stats_script_valueerror",
    "opencode": "neg_opencode_export_bench_client_missing_dataset",
    "text": "neg_text_bench_serving_wrong_dataset",
}
READY = "[2026-12-03 13:34:15] The server is fired up and ready to roll!"
SERVING = '[2026-12-03 13:34:20] INFO:     127.0.0.1:1 - "POST /generate HTTP/1.1" 200 OK'
REQUEST_ERROR = [
    "[2026-12-03 13:34:18] Traceback (most recent call last):",
    '  File "/usr/lib/python3/site-packages/sglang/srt/managers/tokenizer_manager.py", line 9, in f',
    "    raise ValueError(msg)",
    # (a request too long for the context has its own finding, request-rejected)
    "ValueError: Invalid value for response_format: expected a JSON schema object.",
]
DEATH = "[2026-12-03 13:34:19] Received sigquit from a child process. It usually means the child failed."


@pytest.mark.parametrize("kind", sorted(CLIENT_FAILURES))
def test_a_client_failure_next_to_a_healthy_server_is_no_server_incident(kind):
    case = next(c for c in fixture_cases() if c.sidecar.stem == CLIENT_FAILURES[kind])
    report = analyze([str(case.input)], Options())
    assert report.inputs[0].kind == f"transcript_{kind}"
    assert [i for i in report.incidents if i.severity in ("fatal", "error")] == []
    # the server may have been launched before the session began: then there is no attempt
    assert all(a.outcome in ("ready", "stopped") for a in report.attempts)


def _log(tmp_path, lines):
    path = tmp_path / "server.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return analyze([str(path)], Options())


def test_an_error_followed_by_serving_is_one_the_server_survived(tmp_path):
    report = _log(tmp_path, [READY, *REQUEST_ERROR, SERVING])
    [incident] = report.incidents
    assert incident.severity == "warning"
    assert "The server survived it" in incident.explanation
    assert SERVING in [ln.text for ln in incident.evidence]


PROBE = '[2026-12-03 13:34:21] INFO:     10.0.0.9:2 - "GET /health HTTP/1.1" 200 OK'


@pytest.mark.parametrize("simple_scan", [False, True])
def test_probes_answered_after_an_error_are_no_sign_requests_were_served(tmp_path, simple_scan):
    """A kubelet's GET /health keeps being answered while the users' requests hang."""
    lines = [READY, *[PROBE] * 30, *REQUEST_ERROR, *[PROBE] * 30]
    _log(tmp_path, lines)
    report = analyze([str(tmp_path / "server.log")], Options(simple_scan=simple_scan))
    assert report.incidents[0].severity in ("fatal", "error")
    # a request served among the probes is
    lines = [READY, *REQUEST_ERROR, *[PROBE] * 30, SERVING, *[PROBE] * 30]
    _log(tmp_path, lines)
    report = analyze([str(tmp_path / "server.log")], Options(simple_scan=simple_scan))
    [incident] = report.incidents
    assert incident.severity == "warning" and SERVING in [ln.text for ln in incident.evidence]


THREAD_ERROR = [
    "Exception in thread Thread-7 (backup_thread_func):",
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/site-packages/sglang/srt/managers/cache_controller.py", line 9, in f',
    "    self._page_backup(operation)",
    "RuntimeError: batch_put_from failed",
]


def test_serving_after_an_exception_that_ended_a_thread_does_not_make_it_survived(tmp_path):
    report = _log(tmp_path, [READY, *THREAD_ERROR, SERVING])
    [incident] = report.incidents
    assert incident.severity == "error"
    assert "ended the thread Thread-7 (backup_thread_func)" in incident.explanation
    # the same exception with no excepthook header is a request the server survived
    report = _log(tmp_path, [READY, *THREAD_ERROR[1:], SERVING])
    assert [i.severity for i in report.incidents] == ["warning"]


def test_an_error_followed_by_a_death_stays_fatal_even_with_serving_after(tmp_path):
    report = _log(tmp_path, [READY, *REQUEST_ERROR, DEATH, SERVING])
    assert report.incidents[0].severity in ("fatal", "error")
    assert report.verdict != "no incident"


def test_serving_found_deep_in_a_segment_is_the_same_on_both_scan_paths(tmp_path):
    """An error between two serving lines of one 64 KiB segment: the segment is read again."""
    lines = [READY, *[SERVING] * 50, *REQUEST_ERROR, "x", SERVING, *[SERVING] * 50]
    fast = _log(tmp_path, lines)
    simple = analyze([str(tmp_path / "server.log")], Options(simple_scan=True))
    for report in (fast, simple):
        [incident] = report.incidents
        assert incident.severity == "warning"
        assert f"(line {len(REQUEST_ERROR) + 53})" in incident.explanation


def test_errors_after_a_stop_request_are_shutdown_noise(tmp_path):
    stop = "[2026-12-03 13:36:16] SIGTERM received. signum=None frame=None. Draining requests..."
    child = "[2026-12-03 13:36:17] Subprocess scheduler_0 (pid=1) crashed with exit code -15."
    report = _log(tmp_path, [READY, SERVING, stop, child])
    assert report.incidents and {i.severity for i in report.incidents} == {"info"}
    assert report.verdict == "no incident"
    assert _log(tmp_path, [READY, SERVING, child]).incidents[0].severity == "fatal"


def test_a_client_traceback_in_a_server_log_names_the_client(tmp_path):
    script = [
        "Traceback (most recent call last):",
        '  File "/home/me/summarize.py", line 20, in <module>',
        "    summarize(rows)",
        "ValueError: too many values to unpack (expected 2)",
    ]
    report = _log(tmp_path, [READY, SERVING, *script])
    [finding] = report.incidents
    assert (finding.rule_class, finding.severity) == ("client_error", "info")
    assert "summarize.py" in finding.title
    assert report.verdict == "client_error"


def test_every_silent_death_names_evidence_beyond_the_users_words():
    for case in fixture_cases():
        report = analyze([str(case.input)], Options(command=case.user_command))
        for incident in report.incidents:
            if incident.rule != "session-silent-death":
                continue
            attempt = next(a for a in report.attempts if a.number == incident.attempt)
            shown = [s for s in attempt.signals if not s.startswith("the user said")]
            assert shown, (case.id, attempt.signals)


# a scheduler's exception pasted without SGLang's frames (torch's only), then the parent's notice
SCHEDULER_ERROR = [
    '  File "/usr/lib/python3/site-packages/torch/__init__.py", line 1666, in _check_with',
    "    raise error_type(message_evaluated)",
    "RuntimeError: shape '[7, -1, 128]' is invalid for input of size 5120",
]
BATCH = "[2026-12-03 13:34:19 TP0] Decode batch, #running-req: 3, #token: 900, token usage: 0.01"


def test_an_exception_right_before_a_death_notice_is_its_cause(tmp_path):
    # the HTTP process still answers what the scheduler finished: no sign the scheduler lived
    report = _log(tmp_path, [READY, *SCHEDULER_ERROR, SERVING, DEATH])
    root = report.incidents[0]
    assert (root.rule_class, root.rule, root.severity) == ("runtime_crash", "death-cause", "fatal")
    assert root.line == 4 and DEATH in [ln.text for ln in root.evidence]
    assert [i.rule_class for i in report.incidents] == ["runtime_crash"]  # the notice is its symptom


def test_a_death_notice_after_the_scheduler_served_again_has_no_cause_in_the_log(tmp_path):
    report = _log(tmp_path, [READY, *SCHEDULER_ERROR, BATCH, DEATH])
    assert report.incidents[0].rule_class == "silent_death"


def test_a_requests_exception_is_no_death_cause(tmp_path):
    request = [
        "[2026-12-03 13:34:18] ERROR:    Exception in ASGI application",
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/site-packages/uvicorn/protocols/http/h11_impl.py", line 407, in run_asgi',
        "    result = await app(",
        "KeyError: 'choices'",
    ]
    report = _log(tmp_path, [READY, *request, DEATH])
    assert report.incidents[0].rule_class == "silent_death"


def test_the_main_process_answering_after_its_own_error_survived_it(tmp_path):
    # REQUEST_ERROR is the TokenizerManager's: its own access lines show it alive
    report = _log(tmp_path, [READY, *REQUEST_ERROR, SERVING, DEATH])
    assert [i.severity for i in report.incidents if i.rule == "runtime-crash"] == ["warning"]
    assert report.incidents[0].rule_class == "silent_death"


def test_a_scheduler_error_answered_over_then_a_death_is_not_survived(tmp_path):
    crash = [
        "Traceback (most recent call last):",  # pasted without the `... hit an exception:` record
        '  File "/usr/lib/python3/site-packages/sglang/srt/managers/scheduler.py", line 9, in f',
        "    self.process_batch_result(batch, result)",
        "IndexError: list index out of range",
    ]
    report = _log(tmp_path, [READY, *crash, SERVING, DEATH])
    assert (report.incidents[0].rule, report.incidents[0].severity) == ("runtime-crash", "fatal")


KV_TRANSFER_FAILED = (
    "[2026-12-03 13:34:18 TP0] Decode transfer failed for request rank=0 decode_req.req.rid='a1'"
    " decode_req.req.bootstrap_room=42 with exception KVTransferError(bootstrap_room=42): Failed"
    " to get kvcache from prefill instance, it might be dead"
)


def test_a_failure_serving_does_not_undo_stays_an_error_with_serving_after(tmp_path):
    """kv-transfer-failed (outlives_serving): other requests served after it do not make
    the transfer path work again; a request's own error (REQUEST_ERROR) is survived."""
    report = _log(tmp_path, [READY, KV_TRANSFER_FAILED, SERVING])
    [incident] = [i for i in report.incidents if i.rule == "kv-transfer-failed"]
    assert incident.severity == "error"
    assert "kept serving (line 3), but not through what failed" in incident.explanation
    report = _log(tmp_path, [READY, *REQUEST_ERROR, SERVING])
    assert report.incidents[0].severity == "warning"


CUT_SCHEDULER_REPORT = [
    "[2026-12-03 13:34:19 TP3] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/lib/python3/site-packages/sglang/srt/managers/scheduler.py", line 30, in run_scheduler_process',
    "    scheduler.event_loop_overlap()",
    '  File "/usr/lib/python3/site-packages/sglang/srt/managers/scheduler.py", line 90, in event_loop_overlap',
    "    batch_result = self.run_batch(batch)",
]
PARENT_NOTICE = "[2026-12-03 13:34:19] SIGQUIT received. signum=None, frame=None. It usually means one child failed."


def test_a_childs_report_printed_right_under_the_death_notice_is_its_cause(tmp_path):
    # the child logs its traceback, then signals the parent; the parent's notice can land first
    report = _log(tmp_path, [READY, BATCH, PARENT_NOTICE, *CUT_SCHEDULER_REPORT])
    root = report.incidents[0]
    assert root.rule_class == "runtime_crash" and root.severity != "warning"
    assert "silent_death" not in [i.rule_class for i in report.incidents]


def test_a_traceback_far_below_a_death_notice_is_not_its_cause(tmp_path):
    later = [PARENT_NOTICE, BATCH, BATCH, BATCH, *CUT_SCHEDULER_REPORT]
    report = _log(tmp_path, [READY, *later])
    assert report.incidents[0].rule_class == "silent_death"


def test_the_launcher_re_raising_below_a_death_notice_is_its_consequence_not_its_cause(tmp_path):
    launcher = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/site-packages/sglang/srt/entrypoints/engine.py", line 80, in _launch',
        "    raise RuntimeError(msg)",
        "RuntimeError: Rank 0 scheduler is dead. Please check if there are relevant logs.",
    ]
    report = _log(tmp_path, [READY, BATCH, PARENT_NOTICE, *launcher])
    assert report.incidents[0].rule_class != "runtime_crash"

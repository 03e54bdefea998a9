"""A failing client beside a healthy server is a client_error finding, never a server
incident, and never in the way of a real server crash."""

from __future__ import annotations

import json
import subprocess
import sys

from analyzer.formats.json_report import render_json
from analyzer.pipeline import Options, analyze
from tests.fixture_cases import ROOT

READY = "[2026-12-03 13:34:15] The server is fired up and ready to roll!"
SERVING = '[2026-12-03 13:34:20] INFO:     127.0.0.1:1 - "POST /generate HTTP/1.1" 200 OK'
REFUSED = '[2026-12-03 13:34:21] INFO:     127.0.0.1:2 - "POST /v1/chat/completions HTTP/1.1" 400 Bad Request'
BENCH_TRACEBACK = [
    "Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/sglang/bench_serving.py", line 22, in <module>',
    "    cli_main()",
    '  File "/usr/lib/python3/dist-packages/sglang/benchmark/datasets/sharegpt.py", line 79, in load',
    "    with open(dataset_path) as f:",
    "FileNotFoundError: [Errno 2] No such file or directory: '/data/sharegpt.json'",
]
SERVER_OOM = [
    "[2026-12-03 13:35:01] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/lib/python3/dist-packages/sglang/srt/managers/scheduler.py", line 2900, in run_scheduler_process',
    "    scheduler.event_loop_normal()",
    '  File "/usr/lib/python3/dist-packages/sglang/srt/model_executor/model_runner.py", line 1800, in forward',
    "    return self.model.forward(batch)",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.19 GiB of which 1.02 GiB is free.",
    "[2026-12-03 13:35:01] Received sigquit from a child process. It usually means the child failed.",
]
LAUNCH = "python -m sglang.launch_server --model-path /models/m --port 30000 > /tmp/s.log 2>&1 &"
REFUSED_CURL = (
    "curl: (7) Failed to connect to localhost port 30000 after 0 ms: Couldn't connect to server"
)


def _log(tmp_path, lines, simple=False):
    path = tmp_path / "server.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return analyze([str(path)], Options(simple_scan=simple))


def _session(tmp_path, lines):
    """A pasted terminal session: `$ ` prompts, then what each command printed."""
    path = tmp_path / "session.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    report = analyze([str(path)], Options(input_format="text"))
    assert report.inputs[0].kind == "transcript_text"
    return report


def _clients(report):
    return [i for i in report.incidents if i.rule_class == "client_error"]


def test_a_client_failure_never_hides_a_server_crash_in_a_log(tmp_path):
    report = _log(tmp_path, [READY, SERVING, *BENCH_TRACEBACK, SERVING, *SERVER_OOM])
    root = report.incidents[0]
    assert (root.rule_class, root.severity) == ("oom", "fatal")
    assert report.verdict == "oom"
    [client] = _clients(report)
    assert client.severity == "info" and "sglang.bench_serving" in client.title
    assert report.incidents[-1] is client  # after every server incident


def test_a_client_failure_never_hides_a_server_crash_in_a_session(tmp_path):
    report = _session(
        tmp_path,
        [
            f"$ {LAUNCH}",
            "[1] 4242",
            "$ python -m sglang.bench_serving --backend sglang --dataset-path /data/sharegpt.json",
            *BENCH_TRACEBACK,
            "$ tail -n 8 /tmp/s.log",
            READY,
            *SERVER_OOM,
        ],
    )
    root = report.incidents[0]
    assert (root.rule_class, root.severity) == ("oom", "fatal")
    assert report.verdict == "oom"
    [client] = _clients(report)
    assert (client.severity, client.attempt) == ("info", 1)
    assert "sglang.bench_serving" in client.title
    [attempt] = report.attempts
    assert (attempt.outcome, attempt.rule_class) == ("failed", "oom")


def test_curl_refused_before_the_server_answered_is_the_clients(tmp_path):
    report = _session(
        tmp_path,
        [
            f"$ {LAUNCH}",
            "[1] 4242",
            "$ curl -sS localhost:30000/health",
            REFUSED_CURL,
            "$ curl -sS -o /dev/null -w '%{http_code}\\n' localhost:30000/health",
            "200",
        ],
    )
    assert [i.severity for i in report.incidents] == ["info"]
    [client] = _clients(report)
    assert "curl" in client.title
    assert [ln.text for ln in client.evidence] == [REFUSED_CURL]
    assert "before the server was ready" in client.explanation
    assert report.verdict == "client_error"
    assert report.attempts[0].outcome == "ready"


def test_curl_refused_with_no_answer_after_is_no_client_error(tmp_path):
    """Nothing listened and nothing answered later: the server's absence, not the client's."""
    report = _session(
        tmp_path,
        [f"$ {LAUNCH}", "[1] 4242", "$ curl -sS localhost:30000/health", REFUSED_CURL],
    )
    assert _clients(report) == []


def test_a_5xx_answer_is_the_servers_failure_not_the_clients(tmp_path):
    traceback = [
        "Traceback (most recent call last):",
        '  File "/home/me/ask.py", line 6, in <module>',
        "    resp = client.chat.completions.create(model='m', messages=msgs)",
        '  File "/home/me/.venv/lib/python3.11/site-packages/openai/_base_client.py", line 1047, in request',
        "    raise self._make_status_error_from_response(err.response) from None",
        "openai.InternalServerError: Error code: 500 - {'object': 'error', 'message': 'Internal server error'}",
    ]
    session = _session(tmp_path, ["$ python ask.py", *traceback])
    assert _clients(session) == []
    log = _log(tmp_path, [READY, *traceback])
    assert _clients(log) == [] and log.verdict != "client_error"


def test_a_ray_actor_that_died_under_the_client_is_not_the_clients_failure(tmp_path):
    traceback = [
        "Traceback (most recent call last):",
        '  File "/home/me/run.py", line 9, in <module>',
        "    outputs = ray.get(futures)",
        "ray.exceptions.ActorDiedError: The actor died unexpectedly before finishing this task.",
    ]
    report = _log(tmp_path, [READY, SERVING, *traceback])
    assert _clients(report) == [] and report.verdict != "client_error"


def test_a_4xx_answer_names_the_script_that_got_it(tmp_path):
    report = _session(
        tmp_path,
        [
            "$ cd /home/me && python tools/ask.py",
            "Traceback (most recent call last):",
            '  File "/home/me/tools/ask.py", line 6, in <module>',
            "    resp = client.chat.completions.create(model='m', messages=msgs)",
            '  File "/home/me/.venv/lib/python3.11/site-packages/openai/_base_client.py", line 1047, in request',
            "    raise self._make_status_error_from_response(err.response) from None",
            "openai.BadRequestError: Error code: 400 - {'object': 'error', 'message': 'bad', 'code': 400}",
        ],
    )
    [client] = _clients(report)
    assert "ask.py" in client.title and "Error code: 400" in client.explanation


def test_an_error_answer_curl_printed_is_curls(tmp_path):
    body = '{"object":"error","message":"Failed to compile json grammar","type":"BadRequestError","param":null,"code":400}'
    report = _session(
        tmp_path, ["$ curl -s localhost:30000/v1/chat/completions -d @req.json", body]
    )
    [client] = _clients(report)
    assert "curl" in client.title and [ln.text for ln in client.evidence] == [body]


def test_bench_serving_exits_without_a_traceback(tmp_path):
    usage = "No model specified or found. Please provide a model using `--model`."
    report = _session(tmp_path, ["$ python3 -m sglang.bench_serving --backend sglang", usage])
    [client] = _clients(report)
    assert "sglang.bench_serving" in client.title
    # a server that never answered: bench_serving's own wait says nothing about the client
    not_ready = "Server at http://127.0.0.1:30000/v1/models is not ready. Exiting."
    assert _clients(_session(tmp_path, ["$ python3 -m sglang.bench_serving", not_ready])) == []


def test_a_pasted_traceback_is_a_client_only_without_server_frames(tmp_path):
    path = tmp_path / "s.jsonl"
    messages = [
        "this crashed in my other pane:\n" + "\n".join(BENCH_TRACEBACK),
        "and this one:\n" + "\n".join(SERVER_OOM[:-1]),
    ]
    path.write_text(
        "\n".join(
            json.dumps(
                {
                    "type": "user",
                    "uuid": f"u{k}",
                    "timestamp": f"2026-01-01T00:00:0{k}Z",
                    "message": {"role": "user", "content": text},
                }
            )  # fmt: skip
            for k, text in enumerate(messages)
        )
        + "\n",
        encoding="utf-8",
    )
    report = analyze([str(path)], Options(input_format="claude"))
    assert [c.title for c in _clients(report)] == [
        "A client failed, not the server: sglang.bench_serving"
    ]


def test_refused_requests_are_one_http_client_finding_on_both_scan_paths(tmp_path):
    gone = "[2026-12-03 13:34:22] [http_server] Error: Request is disconnected from the client side (type 3). Abort request obj.rid='1'"
    lines = [READY, SERVING, REFUSED, SERVING, gone, REFUSED.replace(":2 -", ":3 -"), SERVING]
    for simple in (False, True):
        report = _log(tmp_path, lines, simple)
        [finding] = report.incidents
        assert (finding.rule_class, finding.severity) == ("client_error", "info")
        assert "http client" in finding.title and "1 refused: 400 Bad Request" in finding.title
        assert [ln.number for ln in finding.evidence] == [3]  # not the aborted request's 400
        assert report.verdict == "client_error"


def test_a_flood_of_refused_requests_never_crowds_out_a_crash(tmp_path):
    report = _log(tmp_path, [READY, *[REFUSED] * 3000, *SERVER_OOM])
    assert report.incidents[0].rule_class == "oom" and report.verdict == "oom"
    [client] = _clients(report)
    assert "at least 1000 refused" in client.title and len(client.evidence) == 5


def test_json_and_exit_code_of_a_client_only_report(tmp_path):
    path = tmp_path / "server.log"
    path.write_text("\n".join([READY, SERVING, *BENCH_TRACEBACK]) + "\n", encoding="utf-8")
    data = json.loads(render_json(analyze([str(path)], Options())))
    assert data["verdict"] == "client_error"
    [finding] = data["incidents"]
    assert (finding["class"], finding["severity"], finding["rule"]) == (
        "client_error", "info", "client-error",
    )  # fmt: skip
    assert finding["evidence"][-1]["text"].startswith("FileNotFoundError")
    done = subprocess.run(
        [sys.executable, "-m", "analyzer", str(path)], capture_output=True, text=True, cwd=ROOT
    )
    assert done.returncode == 0, done.stderr
    assert "A client failed, not the server: sglang.bench_serving" in done.stdout


def test_a_4xx_status_curl_printed_is_an_answer_not_a_death(tmp_path):
    report = _session(
        tmp_path,
        [
            f"$ {LAUNCH}",
            "[1] 4242",
            "$ curl -s -o /dev/null -w '%{http_code}\\n' localhost:30000/health",
            "200",
            "$ curl -s -o /dev/null -w '%{http_code}\\n' localhost:30000/v1/chat/completions -d @bad.json",
            "400",
        ],
    )
    assert [(i.rule_class, i.severity) for i in report.incidents] == [("client_error", "info")]
    assert report.attempts[0].outcome == "ready"


def test_a_frontend_program_failing_on_an_answer_is_the_clients(tmp_path):
    frontend = [
        "Traceback (most recent call last):",
        '  File "/work/gen.py", line 12, in worker',
        "    state = pipeline.run(topic=t)",
        '  File "/usr/lib/python3/dist-packages/sglang/lang/backend/runtime_endpoint.py", line 320, in _assert_success',
        "    content = res.json()",
        '  File "/usr/lib/python3/dist-packages/requests/models.py", line 978, in json',
        "    raise RequestsJSONDecodeError(e.msg, e.doc, e.pos)",
        "requests.exceptions.JSONDecodeError: Expecting value: line 1 column 1 (char 0)",
    ]
    [client] = _clients(_log(tmp_path, [READY, SERVING, *frontend]))
    assert "sglang frontend program" in client.title
    # the server's own code in the traceback makes it the server's, frontend frames or not
    served = [
        *frontend[:4],
        '  File "/usr/lib/python3/dist-packages/sglang/srt/managers/scheduler.py", line 9, in f',
        *frontend[4:],
    ]
    assert _clients(_log(tmp_path, served)) == []
    # `import sglang` fails inside the frontend's modules: an install problem, no client's
    missing = [
        "Traceback (most recent call last):",
        '  File "/usr/lib/python3/dist-packages/sglang/__init__.py", line 5, in <module>',
        "    from sglang.lang.api import (",
        '  File "/usr/lib/python3/dist-packages/sglang/lang/api.py", line 7, in <module>',
        "    from sglang.lang.backend.base_backend import BaseBackend",
        '  File "/usr/lib/python3/dist-packages/sglang/utils.py", line 24, in <module>',
        "    import pybase64",
        "ModuleNotFoundError: No module named 'pybase64'",
    ]
    assert _clients(_log(tmp_path, missing)) == []


def test_sglangs_kernel_package_failing_to_load_in_a_script_is_the_environments(tmp_path):
    # a user's script (or the REPL) importing SGLang's compiled kernel ops: the install is
    # broken for the server too, so it is no client's failure
    repl = [
        "Traceback (most recent call last):",
        '  File "<stdin>", line 1, in <module>',
        "ImportError: /opt/py/lib/python3.10/site-packages/sgl_kernel/common_ops.abi3.so: "
        "undefined symbol: _ZN3c104cuda9SetDeviceEa",
    ]
    report = _log(tmp_path, repl)
    assert _clients(report) == [] and report.verdict == "environment"
    missing = ["Traceback (most recent call last):", '  File "/home/me/run.py", line 3, in <module>',
               "    import sgl_kernel", "ModuleNotFoundError: No module named 'sgl_kernel'"]  # fmt: skip
    assert _clients(_log(tmp_path, missing)) == []
    # the script's own missing dependency stays the script's
    own = [*missing[:2], "    import pandas", "ModuleNotFoundError: No module named 'pandas'"]
    [client] = _clients(_log(tmp_path, [READY, SERVING, *own]))
    assert "run.py" in client.title


def test_an_http_client_librarys_exception_pasted_alone_is_the_clients(tmp_path):
    # openai-python's connection and timeout errors, requests' and httpx's: only a client
    # raises them, so the line alone is a client's failure, not an unknown server one
    for line in (
        "openai.APIConnectionError: Connection error.",
        "openai.APITimeoutError: Request timed out.",
        "httpx.ConnectError: [Errno 111] Connection refused",
    ):
        report = _log(tmp_path, [line])
        assert [i.rule for i in report.incidents] == ["client-error"], line
        assert report.verdict == "client_error"


def test_a_client_librarys_5xx_or_a_warmup_rules_line_alone_is_not_the_clients(tmp_path):
    # a 5xx answer says the server failed; the server's own warmup calls itself with
    # requests (http_server._wait_and_warmup), and the warmup rule explains that line
    answer = "openai.InternalServerError: Error code: 500 - {'object': 'error', 'message': 'x'}"
    assert _clients(_log(tmp_path, [answer])) == []
    warmup = "requests.exceptions.InvalidURL: Invalid URL 'http://:30000/model_info': No host supplied"
    report = _log(tmp_path, [warmup])
    assert _clients(report) == [] and report.verdict == "warmup_failure"

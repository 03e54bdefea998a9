"""The failure-signal stage (analyzer/signals/): every failure shown gets an incident, and
what is not a failure gets none."""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from analyzer.blame.raise_sites import error_catalog_for
from analyzer.core.model import Line
from analyzer.engine.paste_shapes import indent_code, opened_body, split_collapsed
from analyzer.pipeline import Options, analyze
from analyzer.signals.failure_lines import CATALOG_NAME, catalog_entries, signal_of
from analyzer.signals.message_catalog_build import fixed_key
from tests.fixture_cases import ROOT

CLASSES = {"oom", "cuda_error", "environment", "nccl_distributed", "model_load",
           "runtime_crash", "client_error"}  # fmt: skip
SGLANG_PYTHON = os.environ.get("LOGANALYZE_SGLANG_PYTHON")


def _signal(text: str):
    return signal_of(Line("x", 1, text, text))


def _root(tmp_path: Path, lines: list[str]):
    path = tmp_path / "paste.txt"
    path.write_text("\n".join(lines) + "\n", "utf-8")
    report = analyze([str(path)], Options())
    return report.incidents[0] if report.incidents else None


def test_every_catalog_entry_has_a_class_advice_and_its_source():
    entries = catalog_entries()
    assert {e.kind for e in entries} >= {"cuda", "nccl", "torch", "linker", "triton",
                                         "transformers", "huggingface_hub", "libc"}  # fmt: skip
    for entry in entries:
        assert entry.rule_class in CLASSES, entry
        # the CUDA runtime's and NCCL's generic strings are searched as torch prints them
        key = entry.key.removeprefix("CUDA error: ").removeprefix("NCCL error: ")
        assert entry.advice and entry.source and key in entry.message.replace("{}", ""), entry


def test_a_gpu_index_beyond_the_visible_ones_points_at_the_gpu_flags():
    found = _signal("[2026-03-02 09:14:07] worker 5 failed to start: invalid device ordinal")
    entry = catalog_entries()[found.entry]
    assert (found.kind, entry.rule_class) == ("catalog", "cuda_error")
    assert "CUDA_VISIBLE_DEVICES" in entry.advice and "--base-gpu-id" in entry.advice


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('{"error": {"message": "CUDA out of memory. Tried to allocate 2.00 GiB"}}', "catalog"),
        ("python3: symbol lookup error: x.so: undefined symbol: _ZN3c10", "catalog"),
        ("out of resource: shared memory, Required: 232448, Hardware limit: 101376", "catalog"),
        ("Segmentation fault (core dumped)", "death"),
        ("bash: line 1: 4242 Killed                  python -m sglang.launch_server", "death"),
        ("terminate called after throwing an instance of 'c10::Error'", "death"),
        ("Fatal Python error: Aborted", "death"),
        ("worker exited with code 137", "death"),
        ("[2026-03-02 10:00:00] Received sigquit from a child process.", "death"),
        ("launch_server.py: error: argument --tp-size: invalid int value: 'x'", "argparse"),
        ("x.cu:112: k: block: [0,0,0], thread: [1,0,0] Assertion `i < n` failed.", "device_assert"),
        ("2026-03-02 14:00:31,555 ERROR launcher.py:142 worker group gave up", "level"),
        ("E0302 14:00:31.555000 1234 worker.cc:88] lost the connection", "level"),
        ("Error: the worker could not be started", "error"),
        # the tools around a launch: Rust's and Go's panics, the kubelet, shells, docker,
        # ssh, git, nvidia-smi, a harness that gave up, curl (a client's)
        ("thread 'tokio-runtime-worker' panicked at src/router.rs:88:14:", "death"),
        ("panic: runtime error: invalid memory address or nil pointer dereference", "death"),
        ("sglang-0   0/1     CrashLoopBackOff   5 (30s ago)   10m", "death"),
        ("      Reason:       OOMKilled", "death"),
        ("Warning  BackOff  2m  kubelet  Back-off restarting failed container sglang", "death"),
        ("[worker-3] process exited with status 1", "death"),
        ("bash: line 3: python3: command not found", "error"),
        ("/bin/sh: 1: nvidia-smi: not found", "error"),
        ("docker: Error response from daemon: could not select device driver", "error"),
        ("ssh: connect to host gpu-node-3 port 22: Connection timed out", "error"),
        ("fatal: repository 'https://example.com/x.git/' not found", "error"),
        ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.", "error"),
        ("Server failed to start within 600 seconds", "error"),
        ("Timeout waiting for server to start", "error"),
        ("Traceback (most recent call last):", "traceback"),
        ("make[2]: *** [CMakeFiles/common_ops.dir/build.make:76: x.o] Error 1", "error"),
        ("nvcc fatal   : Unsupported gpu architecture 'compute_100a'", "error"),
        ("ninja: build stopped: subcommand failed.", "error"),
        ("c++: fatal error: Killed signal terminated program cc1plus", "death"),
        ("*** SIGSEGV received at time=1700000000 on cpu 3 ***", "death"),
        ("Memory access fault by GPU node-2 (Agent handle: 0x55d5) on address 0x7f00.", "death"),
        ("The actor died unexpectedly before finishing this task.", "death"),
        ("[E socket.cpp:957] [c10d] The client socket has timed out after 600s", "level"),
        ("ray.exceptions.RayTaskError(RuntimeError): ray::Worker.run() (pid=123)", "error"),
        ("HTTP/1.1 503 Service Unavailable", "client"),
        ('{"object":"error","message":"The server is overloaded","code":503}', "client"),
        ("double free or corruption (!prev)", "catalog"),
        ("OSError: [Errno 28] No space left on device: '/root/.cache/x'", "catalog"),
        ("CUDA_ERROR_OUT_OF_MEMORY", "catalog"),
        ("systemd[1]: sglang.service: Main process exited, code=killed, status=9/KILL", "death"),
        ("systemd[1]: sglang.service: Failed with result 'exit-code'.", "death"),
        ("sglang-server   Exited (137) 2 minutes ago", "death"),
        ("zsh: killed     python -m sglang.launch_server --model-path x", "death"),
        ("[Errno 111] Connection refused", "error"),
        ("/usr/bin/python3: No module named sglang", "error"),
        ("curl: (7) Failed to connect to localhost port 30000: Connection refused", "client"),
    ],
)
def test_each_kind_of_failure_line_is_a_signal(text, kind):
    found = _signal(text)
    assert found is not None and found.kind == kind, found


@pytest.mark.parametrize(
    "text",
    [
        "Process finished with exit code 0",
        "[2026-03-02 16:00:25] WARNING: CUDA out of memory during a probe; retrying",
        "[2026-03-02 16:01:00] Receive: obj=GenerateReqInput(text='why Segmentation fault?')",
        "Ignore import error when loading sglang.srt.models.x: cannot open shared object file",
        "x.py:61: UserWarning: CUDA error: invalid argument seen while probing NVML",
        "The error budget is 0.1%; errors are reported per rank.",
        "I0302 14:00:31.555000 1234 worker.cc:88] ERROR_CODE table loaded",
        "[2026-03-02 10:00:00] Decode batch, #running-req: 1, token usage: 0.93, #queue-req: 0",
        "If the shell says 'command not found', install the package first.",
        "Don't panic: the retry worked and the worker is up.",
        "curl -sf http://localhost:30000/health && echo ready",
        "[2026-03-02 10:00:00] Timeout waiting for response from the router; retrying",
        "The pod restarted once (OOMKilledCount: 0 in the dashboard is a metric name)",
        "  File \"/x/sglang/srt/managers/scheduler.py\", line 1, in run",
        "[W socket.cpp:464] [c10d] The server socket has failed to bind, retrying",
        '[2026-03-02 10:00:00] INFO:     127.0.0.1:5000 - "POST /generate HTTP/1.1" 200 OK',
        "HTTP/1.1 200 OK",
        "systemd[1]: sglang.service: Main process exited, code=exited, status=0/SUCCESS",
        "sglang-server   Exited (0) 2 minutes ago",
        "systemd[1]: sglang.service: Failed with result 'success'.",
    ],
)
def test_what_is_not_a_failure_is_no_signal(text):
    assert _signal(text) is None


def test_a_collapsed_log_is_split_back_at_its_boundaries():
    line = (
        "[2026-03-02 11:00:00 TP0] Scheduler hit an exception: Traceback (most recent call "
        'last): File "/x/scheduler.py", line 2400, in run f() File "/x/runner.py", line 3, '
        "in g raise RuntimeError( RuntimeError: Not enough memory."
    )
    parts = split_collapsed(line)
    assert parts[1] == "Traceback (most recent call last):"
    assert parts[2].startswith('File "/x/scheduler.py", line 2400')
    assert parts[-1] == "RuntimeError: Not enough memory."
    assert split_collapsed('a line with one File "x.py", line 3 in it') == [
        'a line with one File "x.py", line 3 in it'
    ]


def test_an_unindented_frames_code_line_is_indented():
    frame = 'File "/x/engine.py", line 800, in _launch_subprocesses'
    assert indent_code(frame, "raise RuntimeError(") == "    raise RuntimeError("
    assert indent_code(frame, "RuntimeError: boom") == "RuntimeError: boom"
    assert indent_code(frame, 'File "/x/y.py", line 3, in f') == 'File "/x/y.py", line 3, in f'
    assert indent_code("not a frame", "raise RuntimeError(") == "raise RuntimeError("


def test_error_bodies_are_opened():
    assert opened_body('{"error": {"message": "boom\\nsecond"}}') == "boom\nsecond"
    shown = "x: Server error: 500 - [address=0.0.0.0:1, pid=2] CUDA error: out of memory"
    assert opened_body(shown) == "CUDA error: out of memory"
    assert opened_body('{"status": "ok"}') is None


def test_an_sglang_message_alone_is_classed_by_its_raise_site(tmp_path):
    root = _root(
        tmp_path, ["Currently standalone speculative decoding does not support dp attention."]
    )
    assert root is not None and root.rule_class == "spec_assertion"
    assert root.raise_site is not None


def test_an_error_record_followed_by_serving_is_survived(tmp_path):
    root = _root(
        tmp_path,
        [
            "[2026-03-02 17:00:00] The server is fired up and ready to roll!",
            "2026-03-02 17:00:05,000 ERROR exporter.py:51 push to gateway timed out",
            "[2026-03-02 17:00:10] Decode batch, #running-req: 2, #token: 300, token usage: "
            "0.01, cuda graph: True, gen throughput (token/s): 80.20, #queue-req: 0",
        ],
    )
    assert root is not None and root.severity == "warning"


def test_a_signal_beside_a_stall_notice_names_the_failure(tmp_path):
    root = _root(
        tmp_path,
        [
            "[2026-03-02 10:01:12 TP0] Init torch distributed begin.",
            "[2026-03-02 10:01:40 TP0] node-2: remote process exited or there was a network error",
        ],
    )
    assert (root.rule_class, root.rule) == ("nccl_distributed", "signal-nccl")
    assert "distributed_init" in root.explanation


def test_an_sglang_message_alone_beside_a_stall_notice_is_its_cause(tmp_path):
    start = [
        "[2026-03-02 10:01:10] server_args=ServerArgs(model_path='m', tp_size=2, port=30000)",
        "[2026-03-02 10:01:12 TP0] Init torch distributed begin.",
    ]
    message = "[2026-03-02 10:01:13] Currently standalone speculative decoding does not support dp attention."
    root = _root(tmp_path, [*start, message])
    assert root is not None and root.rule_class == "spec_assertion"
    assert root.raise_site is not None
    # a startup that only stops: the stall notice, no cause claimed
    stalled = _root(tmp_path, [*start, "[2026-03-02 10:01:13 TP0] Load weight begin."])
    assert stalled is not None and stalled.rule_class == "startup_stall"


@pytest.mark.sglang
@pytest.mark.skipif(not SGLANG_PYTHON, reason="needs LOGANALYZE_SGLANG_PYTHON")
def test_no_warning_or_info_message_of_sglang_is_a_signal():
    """SGLang's logger.warning/info messages (its source, mined with ast) print without a
    level in its default format: none of them may read as a failure."""
    out = subprocess.run(
        [SGLANG_PYTHON, "-c", "import sglang, os; print(os.path.dirname(sglang.__file__))"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    root = Path(out.stdout.strip()) / "srt"
    messages = 0
    for path in root.rglob("*.py"):
        with warnings.catch_warnings():  # its own invalid escapes in strings
            warnings.simplefilter("ignore")
            tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            if node.func.attr not in ("warning", "info", "warning_once") or not node.args:
                continue
            for text in _logged_text(node.args[0]).splitlines():
                messages += 1
                found = _signal(f"[2026-01-01 00:00:00 TP0] {text}")
                assert found is None, (path.relative_to(root), node.lineno, text)
    assert messages > 1000


def _logged_text(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) else "x" for v in node.values)
    return ""


@pytest.mark.sglang
@pytest.mark.skipif(not SGLANG_PYTHON, reason="needs LOGANALYZE_SGLANG_PYTHON")
def test_the_message_catalog_is_what_its_build_script_makes(tmp_path):
    venv = Path(SGLANG_PYTHON).parent.parent
    out = tmp_path / "failure_messages.json"
    subprocess.run(
        [sys.executable, "-m", "analyzer.signals.message_catalog_build", "--venv", str(venv),
         "--out", str(out)],
        cwd=ROOT, check=True, capture_output=True,
    )  # fmt: skip
    shipped = ROOT / "analyzer" / "signals" / CATALOG_NAME
    assert json.loads(out.read_text("utf-8")) == json.loads(shipped.read_text("utf-8"))


def test_an_sglang_message_cut_short_is_classed_by_its_raise_site(tmp_path):
    # a client's body kept the opening of speculative_hook.py's message only
    cut = "Gemma4AssistantForCausalLM draft requires --speculative-algorithm NEXTN or EAGLE"
    root = _root(tmp_path, ["$ curl -s localhost:30000/generate", f'{{"detail": "{cut}"}}'])
    assert root is not None and root.severity in ("fatal", "error")
    assert root.raise_site is not None and root.raise_site.file.endswith("speculative_hook.py")
    errors = error_catalog_for(None)
    assert errors is not None and errors.cut_short(cut)
    # cut inside a word, or too short to name one site: not read as a site's opening
    assert errors.cut_short(cut[:-2]) == []
    assert errors.cut_short("Gemma4AssistantForCausalLM draft requires") == []


def test_a_short_json_body_of_a_healthy_answer_is_no_failure(tmp_path):
    root = _root(tmp_path, ['{"detail": "Not Found"}', '{"message": "ok", "status": 200}'])
    assert root is None or root.severity not in ("fatal", "error")


def test_a_catalog_key_is_taken_from_the_messages_first_line():
    template = (
        "The checkpoint you are trying to load has model type `{}` but Transformers does not"
        " recognize this architecture.\n\nYou can update Transformers with the command `pip"
        " install --upgrade transformers`, a longer second paragraph than the first one."
    )
    assert fixed_key(template) == "but Transformers does not recognize this architecture"
    # a first line with no distinctive text: the whole template's longest fixed text
    assert fixed_key("{}: {}\nthe second line says what failed") == (
        "the second line says what failed"
    )


def test_torchs_device_mismatch_in_a_json_body_is_a_runtime_crash():
    found = _signal(
        '{"detail": "Expected all tensors to be on the same device, but found at least two'
        ' devices, cuda:0 and cpu!"}'
    )
    assert found is not None and found.kind == "catalog"
    assert catalog_entries()[found.entry].rule_class == "runtime_crash"
    assert _signal("Expected all tensors to be on the same device: yes, they are") is None


def _client_traceback(message: str) -> list[str]:
    return [
        "Traceback (most recent call last):",
        '  File "/home/me/run.py", line 12, in <module>',
        '    model = client.get_model("m")',
        f"RuntimeError: {message}",
    ]


def test_a_relayed_5xx_body_is_the_servers_failure_at_its_raise_site(tmp_path):
    sglang = (
        "--decoupled-spec-bind-endpoint, --decoupled-spec-connect-endpoints, and"
        " --decoupled-spec-rank are required for decoupled speculative decoding."
    )
    shown = f"Server error: 500 - [address=0.0.0.0:1, pid=2] {sglang}"
    root = _root(tmp_path, _client_traceback(shown))
    assert root is not None and root.severity in ("fatal", "error")
    assert root.raise_site is not None and root.raise_site.file.endswith("server_args.py")
    # a 4xx answer is the client's own failure
    refused = _root(
        tmp_path, _client_traceback(f"Client error: 404 - [address=0.0.0.0:1] {sglang}")
    )
    assert refused is not None and refused.rule_class == "client_error"
    assert refused.severity == "info"


def test_a_catalog_message_names_a_traceback_no_site_classes(tmp_path):
    shown = "Server error: 500 - [address=0.0.0.0:1, pid=2] CUDA error: CUBLAS_STATUS_NOT_SUPPORTED"
    root = _root(tmp_path, _client_traceback(shown))
    assert root is not None and root.rule_class == "cuda_error" and root.severity == "error"
    # no catalog message: the traceback stays an unknown failure
    plain = _root(tmp_path, _client_traceback("Server error: 500 - [address=0.0.0.0:1] boom"))
    assert plain is not None and plain.rule_class == "unknown" and plain.severity == "error"

"""What users paste: prefixed lines, fragments, logs that just stop (issue: wild input).

Each test takes a complete fixture, cuts or wraps it the way a user's tool would, and
checks that the analysis still says the same thing, with the evidence pointing at the
user's own lines.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.core.model import Frame
from analyzer.engine.normalize import detect_prefixes
from analyzer.pipeline import Options, analyze
from analyzer.rulebook.frame_phases import frame_phases, message_phase_of, phase_of

ROOT = Path(__file__).resolve().parent.parent
CLEAN = [
    ("fixtures/source/environment_no_sgl_kernel.log", "environment"),
    ("fixtures/source/oom_kv_cache_tp8.log", "oom"),
    ("fixtures/real/unrecognized_num_speculative_tokens.log", "argparse_unrecognized"),
    ("fixtures/source/hidden_dim_eagle3_served_as_eagle.log", "hidden_dim_mismatch"),
    ("fixtures/source/fault_segv_graph_capture.log", "cuda_graph_capture"),
]
PREFIXES = {
    "docker-compose": lambda n, line: f"sglang-1  | {line}",
    "kubectl": lambda n, line: f"[pod/sglang-0/server] {line}",
    "journald": lambda n, line: f"Dec 03 10:00:{n % 60:02d} gpu-host python3[4242]: {line}",
    "ci-timestamp": lambda n, line: f"2026-01-05T10:00:{n % 60:02d}.1234567Z {line}",
    "jenkins": lambda n, line: f"[2026-01-05T10:00:{n % 60:02d}.123Z] {line}",
    "cri": lambda n, line: f"2026-01-05T10:00:01.123456789Z stderr F {line}",
    "grep-n": lambda n, line: f"{n}:{line}",
    "grep-H": lambda n, line: f"logs/server.log:{n}:{line}",
    "quote": lambda n, line: f"> {line}",
    "torchrun": lambda n, line: f"[rank0]: {line}",
    "ray-torchrun": lambda n, line: f"(WorkerDict pid=4242) [rank0]: {line}",
    # no known tool: learned from where SGLang's own text starts (normalize.learned_form)
    "pdsh": lambda n, line: f"gpu-node07: {line}",
    "ray-actor-ip": lambda n, line: f"(SGLangEngine pid=4242, ip=10.0.0.2) {line}",
    "stern": lambda n, line: f"sglang-7d9f8-x2k4q server {line}",
    "rfc3339-syslog": lambda n, line: (
        f"2026-01-05T10:00:{n % 60:02d}.123+00:00 gpu-host sglang[77]: {line}"
    ),
    "python-asctime": lambda n, line: f"2026-01-05 10:00:{n % 60:02d},{n % 1000:03d} {line}",
    "indented": lambda n, line: f"    {line}",
    # rich's RichHandler: the time only when it changes, the level padded to 8, the message
    # padded to the console width (a longer one runs into the path column), the path column
    "rich": lambda n, line: (
        f"{'[01/05/26 10:00:00]' if n == 1 else ' ' * 19} INFO     {line:<150} launcher.py:161"
    ),
    "pipe-logger": lambda n, line: f"2026-01-05 10:00:{n % 60:02d} | ERROR | stderr | {line}",
}


def _write(tmp_path: Path, name: str, lines: list[str], newline: str = "\n") -> Path:
    path = tmp_path / name
    path.write_bytes((newline.join(lines) + newline).encode("utf-8"))
    return path


def _root(path: Path):
    report = analyze([str(path)], Options())
    causes = [i for i in report.incidents if i.severity in ("fatal", "error")]
    return causes[0] if causes else None


def _lines(fixture: str) -> list[str]:
    return (ROOT / fixture).read_text("utf-8").splitlines()


@pytest.mark.parametrize("form", sorted(PREFIXES))
@pytest.mark.parametrize(("fixture", "expected"), CLEAN, ids=[c[1] for c in CLEAN])
def test_a_prefixed_log_reads_as_the_clean_one(tmp_path, fixture, expected, form):
    clean = _root(ROOT / fixture)
    assert clean is not None and clean.rule_class == expected
    wrapped = [PREFIXES[form](n, line) for n, line in enumerate(_lines(fixture), start=1)]
    root = _root(_write(tmp_path, "pasted.log", wrapped))
    assert root is not None, form
    assert (root.rule_class, root.line, root.offending_flags) == (
        clean.rule_class,
        clean.line,
        clean.offending_flags,
    )
    decisive = next(ln for ln in root.evidence if ln.number == root.line)
    assert decisive.text == wrapped[root.line - 1]  # the evidence is the user's own line


@pytest.mark.parametrize(
    ("outer", "inner"),
    [("quote", "grep-n"), ("docker-compose", "ci-timestamp"), ("kubectl", "torchrun")],
)
def test_prefixes_in_layers_are_all_read_past(tmp_path, outer, inner):
    fixture, expected = CLEAN[1]
    clean = _root(ROOT / fixture)
    wrapped = [
        PREFIXES[outer](n, PREFIXES[inner](n, line))
        for n, line in enumerate(_lines(fixture), start=1)
    ]
    root = _root(_write(tmp_path, "pasted.log", wrapped))
    assert root is not None and (root.rule_class, root.line) == (expected, clean.line)
    assert root.explanation == clean.explanation  # the message was read without the prefixes


def test_layered_prefixes_are_all_peeled_even_with_blank_quoted_lines(tmp_path):
    # a CI console (Jenkins' Timestamper) quoted in an issue comment, a blank `>` line
    # after every line: both layers come off, the blank quoted lines count for neither
    fixture, expected = CLEAN[0]
    wrapped = []
    for n, line in enumerate(_lines(fixture), start=1):
        wrapped += [f"> {PREFIXES['jenkins'](n, line)}", "> "]
    assert detect_prefixes(wrapped).names == ["quote", "timestamp"]
    root = _root(_write(tmp_path, "quoted_ci.log", wrapped))
    assert root is not None and root.rule_class == expected
    assert detect_prefixes(["> 1:a", "> 2:b", "> 3:c"]).body_span("> 2:b")[0] == len("> 2:")


def test_a_launchers_rich_log_of_its_workers_output_is_read_as_the_workers_log(tmp_path):
    # a launcher relays each worker's line through rich's RichHandler with its own tag, then
    # logs its own verdict: the worker's AssertionError ends where the launcher's line starts
    worker = [
        "Traceback (most recent call last):",
        '  File "/x/sglang/srt/entrypoints/engine.py", line 1034, in _launch_subprocesses',
        "    server_args.check_server_args()",
        '  File "/x/sglang/srt/server_args.py", line 5163, in check_server_args',
        "    assert self.moe_dense_tp_size in {",
        "AssertionError: moe_dense_tp_size only support 1 and None currently",
    ]
    relayed = [
        f"{'[03/19/26 14:02:51]' if n == 0 else ' ' * 19} INFO     [agg_worker_0] 0: "
        f"{line:<90} launcher.py:161"
        for n, line in enumerate(worker)
    ]
    lines = [
        *relayed,
        f"[03/19/26 14:02:53] ERROR    agg_worker_0 exited with code 1{' ' * 70} launcher.py:188",
    ]
    prefixes = detect_prefixes(lines)
    assert prefixes.names == ["rich", "worker-tag", "rank-label"]
    assert prefixes.columns == ("launcher.py:161", "launcher.py:188")
    root = _root(_write(tmp_path, "launcher.log", lines))
    assert root is not None and root.rule_class == "config_validation"
    assert root.offending_flags == ["--moe-dense-tp-size"]
    assert "exited with code" not in root.explanation  # the launcher's line is not the message
    decisive = next(ln for ln in root.evidence if ln.number == root.line)
    assert decisive.text[root.span[0] : root.span[1]].startswith("AssertionError: moe_dense")


def test_a_message_that_fills_rich_s_column_still_loses_the_column():
    prefixes = detect_prefixes(
        [f"[01/05/26 10:00:00] INFO     line {n:<40} server.py:12" for n in range(3)]
    )
    start, end, layers = prefixes.body_span(f"{' ' * 19} INFO     {'x' * 44}server.py:12")
    assert (end - start, layers) == (44, 1)


def test_crlf_and_a_markdown_fence_change_nothing(tmp_path):
    fixture, expected = CLEAN[0]
    lines = ["Here is the log:", "```text", *_lines(fixture), "```", "any idea?"]
    root = _root(_write(tmp_path, "comment.txt", lines, newline="\r\n"))
    assert root is not None and root.rule_class == expected


@pytest.mark.parametrize(("fixture", "expected"), CLEAN[:2], ids=[c[1] for c in CLEAN[:2]])
def test_a_traceback_without_its_header_is_classified_the_same(tmp_path, fixture, expected):
    lines = [ln for ln in _lines(fixture) if "Traceback (most recent call last)" not in ln]
    root = _root(_write(tmp_path, "headless.log", lines))
    assert root is not None and root.rule_class == expected


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.", "oom"),
        ("ModuleNotFoundError: No module named 'sgl_kernel'", "environment"),
        (
            "launch_server.py: error: argument --tool-call-parser: invalid choice: 'qwen3' "
            "(choose from 'llama3', 'qwen25', 'mistral')",
            "argparse_invalid",
        ),
        (
            "sglang serve: error: unrecognized arguments: --num-speculative-tokens 4",
            "argparse_unrecognized",
        ),
        # a checkpoint tensor's name needs no frames; a request id's does (at worst unknown)
        ("KeyError: 'midlayer.self_attn.qkv_proj.weight'", "weight_key_mismatch"),
        ("KeyError: '9f3c2a1be0d44c7f8a6b5e4d3c2b1a09'", None),
        # pytest's failure line and its short summary, in a CI job that tests a server
        (
            "E   RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
            "oom",
        ),
        (
            "FAILED test/srt/test_x.py::TestX::test_y - RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
            "oom",
        ),
        # auto_choose_speculative_params's message alone: no other site prints it
        ("ValueError: my-org/llama-8b/config.json is not found.", "spec_assertion"),
    ],
)
def test_one_pasted_line_gets_an_incident(tmp_path, line, expected):
    root = _root(_write(tmp_path, "one.txt", [line]))
    assert root is not None, line
    if expected is not None:
        assert root.rule_class == expected
    assert len({(e.source, e.number) for e in root.evidence}) == len(root.evidence), "a line twice"


def test_a_traceback_cut_before_its_exception_says_so(tmp_path):
    lines = _lines(CLEAN[0][0])
    last = max(i for i, ln in enumerate(lines) if ln.lstrip().startswith('File "'))
    root = _root(_write(tmp_path, "cut.log", lines[: last + 1]))
    assert root is not None and root.rule_class == "unknown"
    assert "cut off before its exception" in root.title


def test_a_log_that_stops_names_the_phase_and_the_rank_behind(tmp_path):
    lines = [
        "[2026-01-01 10:00:00] server_args=ServerArgs(model_path='/m', tp_size=2)",
        "[2026-01-01 10:00:01 TP0] Init torch distributed begin.",
        "[2026-01-01 10:00:01 TP1] Init torch distributed begin.",
        "[2026-01-01 10:00:02 TP0] Init torch distributed ends. mem usage=0.1 GB",
        "[2026-01-01 10:00:02 TP0] Load weight begin. avail mem=78.10 GB",
    ]
    root = _root(_write(tmp_path, "stops.log", lines))
    assert root is not None and root.rule_class == "startup_stall"
    assert "distributed init" in root.title
    assert "TP1 stopped" in root.explanation
    assert any("NCCL_DEBUG=INFO" in a for a in root.advice)


def test_a_serving_log_that_stops_is_healthy(tmp_path):
    lines = [
        "[2026-01-01 10:00:02 TP0] Load weight begin. avail mem=78.10 GB",
        "[2026-01-01 10:01:00] The server is fired up and ready to roll!",
        "[2026-01-01 10:01:05 TP0] Decode batch, #running-req: 1, #token: 90, token usage: 0.01",
    ]
    assert _root(_write(tmp_path, "serving.log", lines)) is None


def test_text_that_only_looks_prefixed_is_left_alone():
    # python logging's own timestamps, clock times, SGLang's bracket prefix: content, not wrappers
    assert (
        detect_prefixes(["2026-01-01 10:00:00,1 INFO a", "2026-01-01 10:00:01,2 INFO b"]).names
        == []
    )
    assert detect_prefixes(["12:00:01 start", "12:00:02 stop"]).names == []
    assert (
        detect_prefixes(
            ["[2026-12-02 18:13:25] --x is deprecated", "[2026-12-02 18:13:26] y"]
        ).names
        == []
    )
    # a table of timings is no logger layout: no level, no logger name
    assert (
        detect_prefixes(
            ["2026-01-01 10:00:00 | 512 | 0.93", "2026-01-01 10:00:09 | 64 | 0.41"]
        ).names
        == []
    )
    assert detect_prefixes(["2024-05-26 22:07:41 | ERROR | stderr | Traceback"]).names == [
        "pipe-logger"
    ]
    # grep -n numbers must go up
    assert detect_prefixes(["86:a", "87:b", "90-c"]).names == ["grep-number"]
    assert detect_prefixes(["86:a", "12:b", "40:c"]).names == []


def _last_traceback_cut(fixture: str, frames_dropped: int = 0) -> list[str]:
    """The fixture's last traceback from its header down to a `File` line, as a paste cut
    there: its last frame's, or one `frames_dropped` above it."""
    lines = _lines(fixture)
    start = max(i for i, ln in enumerate(lines) if "Traceback (most recent call last)" in ln)
    frames = [i for i, ln in enumerate(lines) if i > start and ln.lstrip().startswith('File "')]
    return lines[start : frames[-1 - frames_dropped] + 1]


@pytest.mark.parametrize(
    ("fixture", "dropped", "expected"),
    [
        ("fixtures/source/nccl_multinode_socket.log", 0, "nccl_distributed"),
        ("fixtures/source/oom_weight_loading.log", 0, "oom"),  # cut inside torch.empty
        ("fixtures/source/cuda_graph_capture_failure.log", 1, "cuda_graph_capture"),
        ("fixtures/source/weight_key_mismatch_eagle3_midlayer.log", 0, "model_load"),
        ("fixtures/real/environment_no_nvidia_driver.log", 0, "environment"),  # CUDA init
    ],
)
def test_a_traceback_cut_before_its_exception_is_classed_by_the_phase_of_its_frames(
    tmp_path, fixture, dropped, expected
):
    root = _root(_write(tmp_path, "cut.log", _last_traceback_cut(fixture, dropped)))
    assert root is not None and (root.rule_class, root.severity) == (expected, "error")
    assert root.rule.startswith("frame-phase:")
    assert "cut off before its exception" in root.title


def test_a_traceback_cut_while_serving_names_no_startup_phase(tmp_path):
    # a decode step's forward runs through model code, but no startup phase: the scheduler's
    # event loop places it in serving (the exception, cut off, is not known: an error)
    lines = _last_traceback_cut("fixtures/source/cuda_error_illegal_access_decode.log")
    root = _root(_write(tmp_path, "cut.log", lines))
    assert root is not None and root.rule == "frame-phase:serving"
    assert root.rule_class == "runtime_crash" and root.severity == "error"


def _crash_through(*frames: tuple[str, str, str]) -> list[str]:
    lines = [
        "[2026-01-01 10:00:00 TP0] Scheduler hit an exception: Traceback (most recent call last):"
    ]
    for file, function, code in frames:
        lines += [
            f'  File "/opt/sglang/python/sglang/{file}", line 100, in {function}',
            f"    {code}",
        ]
    return [*lines, "ValueError: too many values to unpack (expected 2)"]


MODEL_FORWARD = ("srt/models/llama.py", "forward", "hidden_states, aux = hidden_states")


@pytest.mark.parametrize(
    ("frames", "expected"),
    [
        # raised while capturing: a capture failure, whatever its type
        (
            [
                (
                    "srt/model_executor/model_runner.py",
                    "init_cuda_graphs",
                    "self.graph_runner = CudaGraphRunner(self)",
                ),
                (
                    "srt/model_executor/cuda_graph_runner.py",
                    "capture_one_batch_size",
                    "out = run_once()",
                ),
                MODEL_FORWARD,
            ],
            "cuda_graph_capture",
        ),
        # the same exception in a decode step's forward is a crash while serving
        (
            [
                (
                    "srt/managers/scheduler.py",
                    "event_loop_normal",
                    "result = self.run_batch(batch)",
                ),
                (
                    "srt/model_executor/model_runner.py",
                    "forward_decode",
                    "return self.model.forward(",
                ),
                MODEL_FORWARD,
            ],
            "runtime_crash",
        ),
        # raised while ModelRunner.load_model fills the weights: the model did not load
        (
            [
                (
                    "srt/model_executor/model_runner.py",
                    "load_model",
                    "self.model = self.loader.load_model(",
                ),
                (
                    "srt/model_loader/loader.py",
                    "load_weights_and_postprocess",
                    "model.load_weights(weights)",
                ),
                ("srt/models/llama.py", "load_weights", "weight_loader(param, loaded_weight)"),
            ],
            "model_load",
        ),
        # a layer's __init__ runs outside loading too (an attention backend built by
        # ModelRunner.init_attention_backend): only a cut traceback is placed by it
        (
            [
                (
                    "srt/model_executor/model_runner.py",
                    "init_attention_backend",
                    "self.attn_backend = self._get_attention_backend()",
                ),
                ("srt/layers/attention/flashinfer_backend.py", "__init__", "assert x"),
            ],
            "runtime_crash",
        ),
    ],
)
def test_a_complete_traceback_raised_in_a_whole_phase_is_of_its_class(tmp_path, frames, expected):
    root = _root(_write(tmp_path, "crash.log", _crash_through(*frames)))
    assert root is not None and root.rule_class == expected and root.severity == "fatal"


@pytest.mark.parametrize("phase", frame_phases(), ids=lambda p: p.id)
def test_every_frame_phase_claims_its_case_and_not_its_negative(phase):
    assert {c.fires for c in phase.cases} == {True, False}
    for case in phase.cases:
        if case.message is not None:
            by_message = message_phase_of(case.message)
            assert (by_message is not None and by_message.phase.id == phase.id) == case.fires
            continue
        if case.code is not None:
            frames = (
                Frame("/opt/venv/lib/python3.12/site-packages/torch/x.py", 1, "f", case.code),
            )
        else:
            file, function = case.frame.split(":")
            frames = (Frame(f"/opt/venv/lib/python3.12/site-packages/sglang/{file}", 1, function),)
        found = phase_of(frames)
        assert (found is not None and found.phase.id == phase.id) == case.fires, case


OLD_LAUNCHER = [  # up to 0.3 the launcher re-raised the child's traceback as its message
    "Traceback (most recent call last):",
    '  File "/opt/venv/lib/python3.10/site-packages/sglang/launch_server.py", line 17, in <module>',
    "    launch_server(server_args)",
    '  File "/opt/venv/lib/python3.10/site-packages/sglang/srt/server.py", line 365, in launch_server',
    "    raise RuntimeError(",
    "RuntimeError: Initialization failed. controller_init_state: Traceback (most recent call last):",
    '  File "/opt/venv/lib/python3.10/site-packages/sglang/srt/managers/controller_single.py", line 149, in start_controller_process',
    "    controller = ControllerSingle(",
    '  File "/opt/venv/lib/python3.10/site-packages/sglang/srt/model_executor/model_runner.py", line 110, in __init__',
    "    self.load_model()",
    '  File "/opt/venv/lib/python3.10/site-packages/sglang/srt/model_executor/model_runner.py", line 204, in load_model',
    "    self.model = get_model(",
    '  File "/opt/venv/lib/python3.10/site-packages/sglang/srt/model_executor/model_runner.py", line 93, in get_model_cls_by_arch_name',
    "    raise ValueError(",
    "ValueError: Unsupported architectures: FooForCausalLM. Supported list: ['LlamaForCausalLM']",
    ", detoken_init_state: init ok",
]


def test_a_traceback_inside_an_exception_message_is_read_as_its_own(tmp_path):
    root = _root(_write(tmp_path, "whole.log", OLD_LAUNCHER))
    assert root is not None and (root.rule_class, root.line) == ("model_load", 15)
    # cut before the child's exception: its frames still say where it was
    root = _root(_write(tmp_path, "cut.log", OLD_LAUNCHER[:11]))
    assert root is not None and root.rule_class == "model_load"
    assert "cut off before its exception" in root.title


def test_an_exception_line_whose_message_starts_below_it_keeps_the_message(tmp_path):
    lines = [
        "ImportError: ",
        "[sgl_kernel] CRITICAL: Could not load any common_ops library!",
        "- ImportError: /opt/venv/lib/python3.12/site-packages/sgl_kernel/common_ops.abi3.so: "
        "undefined symbol: _ZN3c104cuda9SetDeviceEi",
    ]
    root = _root(_write(tmp_path, "one.txt", lines))
    assert root is not None and root.rule_class == "environment"
    assert "undefined symbol" in root.title  # read from the message's own lines


STEP_LINES = {
    "cuda_graph_capture": "[2026-01-01 10:00:05 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=20.00 GB",
    "weight_loading": "[2026-01-01 10:00:05 TP0] Load weight begin. avail mem=78.00 GB",
    "serving": "[2026-01-01 10:00:05] The server is fired up and ready to roll!",
    "captured": "[2026-01-01 10:00:05 TP0] Capture cuda graph end. Time elapsed: 9.00 s. mem usage=1.00 GB. avail mem=18.00 GB.",
}
BARE_EXCEPTION = "ValueError: too many values to unpack (expected 2)"


@pytest.mark.parametrize(
    ("step", "expected"),
    [
        ("cuda_graph_capture", "cuda_graph_capture"),
        ("weight_loading", "model_load"),
        ("serving", "runtime_crash"),
        ("captured", "unknown"),  # a step that ended: the next one is not known
    ],
)
def test_an_exception_pasted_without_frames_is_placed_in_the_step_the_log_had_begun(
    tmp_path, step, expected
):
    lines = [
        "[2026-01-01 10:00:00 TP0] Init torch distributed ends. mem usage=0.10 GB",
        STEP_LINES[step],
        BARE_EXCEPTION,
    ]
    root = _root(_write(tmp_path, "steps.log", lines))
    assert root is not None and root.rule_class == expected
    if expected != "unknown":
        assert f"(line {2})" in root.explanation


def test_a_traceback_all_outside_sglang_after_ready_is_not_the_servers(tmp_path):
    lines = [
        STEP_LINES["serving"],
        "Traceback (most recent call last):",
        '  File "/opt/venv/lib/python3.12/site-packages/numpy/core/fromnumeric.py", line 9, in f',
        "    return x.reshape(shape)",
        BARE_EXCEPTION,
    ]
    root = _root(_write(tmp_path, "client.log", lines))
    assert root is not None and root.rule_class == "unknown"


@pytest.mark.parametrize(("fixture", "expected"), CLEAN, ids=[c[1] for c in CLEAN])
def test_a_log_as_sglang_wrote_it_has_no_prefix_to_learn(fixture, expected):
    assert detect_prefixes(_lines(fixture)).names == []


def test_nccls_own_line_format_is_not_a_prefix():
    lines = [
        "[2026-01-01 10:00:00 TP0] Init torch distributed begin.",
        *(f"gpu-a:8841:9011 [{i}] NCCL INFO proxy.cc:698 -> 6" for i in range(4)),
        *(f"gpu-a:8841:9011 [{i}] NCCL WARN NET/IB : Got completion from peer" for i in range(4)),
    ]
    assert detect_prefixes(lines).names == []


@pytest.mark.parametrize(
    "line",
    [
        "launch_server.py: error: argument --attention-backend: invalid choice: 'sdpa_x' "
        "(choose from 'triton', 'torch_native')",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    ],
)
def test_a_line_or_two_behind_an_unknown_prefix_reads_as_the_bare_line(tmp_path, line):
    bare = _root(_write(tmp_path, "bare.log", [line]))
    host = _root(_write(tmp_path, "host.log", [f"gpu-node07: {line}"]))
    assert bare is not None and host is not None
    assert (host.rule_class, host.offending_flags) == (bare.rule_class, bare.offending_flags)


OOM_LINE = "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."


@pytest.mark.parametrize(
    "wrapped",
    [
        f"**{OOM_LINE}**",
        f"It stops with **_{OOM_LINE}_** right after loading. Any idea?",
        f"The log ends in `{OOM_LINE}` and nothing else.",
    ],
)
def test_an_exception_quoted_in_markdown_prose_reads_as_the_bare_line(tmp_path, wrapped):
    bare = _root(_write(tmp_path, "bare.txt", [OOM_LINE]))
    quoted = _root(_write(tmp_path, "quoted.txt", ["Launching the server:", wrapped]))
    assert bare is not None and quoted is not None
    assert (quoted.rule_class, quoted.title) == (bare.rule_class, bare.title)


def test_an_exception_quoted_inside_a_logger_line_stays_content():
    # SGLang's own `[date time]` line mentioning an exception in backticks is not prose
    line = "[2026-01-01 10:00:00] Retrying after `ValueError: bad chunk` from the loader"
    assert detect_prefixes([line, "[2026-01-01 10:00:01] ok"]).names == []
    assert "markdown-emphasis" in detect_prefixes(["see **ValueError: x**"]).names


def test_a_wrapper_line_that_kept_only_the_exception_is_that_exception(tmp_path):
    # scheduler.py logs f"Scheduler hit an exception: {traceback}"; pasted with the frames
    # cut, the exception line joins the wrapper's: the same fragment as the line alone
    joined = "[2026-01-01 10:00:00 TP0] Scheduler hit an exception: RuntimeError: Not enough memory. Please try to increase --mem-fraction-static."
    root = _root(_write(tmp_path, "joined.log", [joined]))
    assert root is not None and root.rule_class == "oom"
    # the wrapper with nothing after it names no exception, but still shows the scheduler's
    # death (issue 33: SGLang's `hit an exception` is a failure signal): a death, no cause
    bare = "[2026-01-01 10:00:00 TP0] Scheduler hit an exception: see above"
    death = _root(_write(tmp_path, "bare.log", [bare]))
    assert death is not None and (death.rule, death.rule_class) == ("signal-death", "silent_death")
    assert death.rule_class != "oom" and not death.offending_flags

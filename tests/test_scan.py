"""The scanner's understanding of SGLang's line shapes."""

from __future__ import annotations

from analyzer.core.model import InputSummary
from analyzer.engine.scan import scan_lines
from analyzer.sglang.log_format import parse_server_args, split_prefix


def scan(lines, triggers=("error",)):
    return scan_lines(InputSummary("t.log"), lines, list(triggers))


def test_prefix_with_any_subset_of_ranks():
    line = split_prefix("t.log", 7, "[2026-02-23 18:05:01 DP1 TP3 EP3] Load weight begin.")
    assert line.timestamp == "2026-02-23 18:05:01"
    assert line.ranks == (("DP", 1), ("TP", 3), ("EP", 3))
    assert line.rank_label == "DP1 TP3 EP3"
    assert line.body == "Load weight begin."
    assert line.number == 7
    bare = split_prefix("t.log", 1, "[2026-02-23 18:05:01] Server started")
    assert bare.ranks == () and bare.body == "Server started"
    pp = split_prefix("t.log", 1, "[2026-02-23 18:05:01 PP1 TP0] x")
    assert pp.rank_label == "PP1 TP0"


def test_ray_actor_prefix_and_ansi_colours_are_split_off():
    line = split_prefix(
        "t.log",
        1,
        "(SchedulerActor pid=4242, ip=10.0.0.5) \x1b[33m[2026-02-23 18:05:01 TP2] hi\x1b[0m",
    )
    assert line.actor == "SchedulerActor pid=4242"
    assert line.ranks == (("TP", 2),)
    assert line.body == "hi"
    assert "\x1b" not in line.text


def test_bracketed_text_that_is_not_a_prefix_stays_in_the_body():
    line = split_prefix("t.log", 1, "[WARNING] something")
    assert line.body == "[WARNING] something" and line.ranks == ()


TRACEBACK = [
    "[2026-02-23 18:05:01 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/x/sglang/srt/managers/scheduler.py", line 10, in run_scheduler_process',
    "    scheduler = Scheduler(server_args)",
    '  File "/x/sglang/srt/mem_cache/pool.py", line 96, in __post_init__',
    "    raise RuntimeError(msg)",
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
    "",
    "[2026-02-23 18:05:02] Received sigquit from a child process. It usually means the child failed.",
]


def test_scheduler_traceback_is_parsed_with_frames_and_rank():
    log = scan(TRACEBACK)
    assert len(log.tracebacks) == 1
    tb = log.tracebacks[0]
    assert tb.exception_type == "RuntimeError"
    assert tb.exception_message.startswith("Not enough memory")
    assert [f.function for f in tb.frames] == ["run_scheduler_process", "__post_init__"]
    assert tb.frames[-1].code == "raise RuntimeError(msg)"
    assert tb.first.rank_label == "TP0"
    assert tb.exception_line.number == 6


def test_chained_tracebacks_become_one_with_its_causes():
    lines = [
        "Traceback (most recent call last):",
        '  File "a.py", line 1, in f',
        "    g()",
        "KeyError: 'layers.0.mlp.weight'",
        "",
        "During handling of the above exception, another exception occurred:",
        "",
        "Traceback (most recent call last):",
        '  File "b.py", line 2, in h',
        "    raise RuntimeError('load failed')",
        "RuntimeError: load failed",
    ]
    log = scan(lines)
    assert len(log.tracebacks) == 1
    final = log.tracebacks[0]
    assert final.exception_type == "RuntimeError"
    assert [c.exception_type for c in final.chain] == ["KeyError"]


SUBPROCESS_FAILURE = [
    "Traceback (most recent call last):",
    '  File "/sglang/srt/model_executor/cuda_graph_runner.py", line 662, in run_once',
    "    out = forward(input_ids)",
    '  File "/torch/_inductor/compile_worker/subproc_pool.py", line 81, in _unpickle',
    "    raise SubprocException(error_msg) from None",
    "torch._inductor.compile_worker.subproc_pool.SubprocException: An exception occurred in a"
    " subprocess:",
    "",
    "Name=<unknown>",
    "Traceback (most recent call last):",
    '  File "/torch/_inductor/compile_worker/subproc_pool.py", line 330, in do_job',
    "    result = job()",
    "RuntimeError: PassManager::run failed",
    "",
    "During handling of the above exception, another exception occurred:",
    "",
    "Traceback (most recent call last):",
    '  File "/sglang/srt/model_executor/cuda_graph_runner.py", line 386, in __init__',
    "    raise Exception(",
    "Exception: Capture cuda graph failed: SubprocException: An exception occurred",
]


def test_a_traceback_embedded_in_a_message_is_one_failure_with_it():
    # torch's SubprocException carries the job's traceback in its message: the capture
    # failure that follows is chained to both
    log = scan(SUBPROCESS_FAILURE)
    assert len(log.tracebacks) == 1
    final = log.tracebacks[0]
    assert [c.exception_type for c in final.chain] == [
        "RuntimeError",
        "torch._inductor.compile_worker.subproc_pool.SubprocException",
    ]
    assert final.chain[1].frames[0].function == "run_once"


def test_a_traceback_far_below_a_message_ending_in_a_colon_stays_apart():
    lines = [*SUBPROCESS_FAILURE[:6], "", "[2026-01-01 00:00:00] next", "x", "y"]
    lines += SUBPROCESS_FAILURE[8:12]
    log = scan(lines)
    assert [t.exception_type for t in log.tracebacks] == [
        "torch._inductor.compile_worker.subproc_pool.SubprocException",
        "RuntimeError",
    ]
    assert log.tracebacks[1].chain == ()
    # a message not ending in `:` opens no embedded traceback either
    plain = [*SUBPROCESS_FAILURE[:5], "ValueError: bad value", "", *SUBPROCESS_FAILURE[8:12]]
    assert [len(t.chain) for t in scan(plain).tracebacks] == [0, 0]


def test_caret_lines_are_not_taken_for_code():
    lines = [
        "Traceback (most recent call last):",
        '  File "/x/speculative_hook.py", line 1162, in _handle_eagle_family',
        "    and cfg.speculative_num_draft_tokens is None",
        "        ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        "AssertionError",
    ]
    tb = scan(lines).tracebacks[0]
    assert tb.frames[0].code == "and cfg.speculative_num_draft_tokens is None"
    assert tb.exception_type == "AssertionError" and tb.exception_message == ""


def test_a_launcher_record_after_the_exception_does_not_continue_its_message():
    lines = [
        "Traceback (most recent call last):",
        '  File "/x/sglang/srt/server_args.py", line 1797, in _handle_speculative_decoding',
        "    self.speculative_eagle_topk > 1",
        "TypeError: '>' not supported between instances of 'NoneType' and 'int'",
        "2025-11-19 21:36:58.449018+08:00 - runner - ERROR - Failed to run instance: exit code 1",
    ]
    tb = scan(lines).tracebacks[0]
    assert tb.exception_message == "'>' not supported between instances of 'NoneType' and 'int'"
    # a message Python prints over several lines still reads whole
    lines[3:] = ["ValueError: two lines", "  second line of the message"]
    assert scan(lines).tracebacks[0].exception_message == "two lines\n  second line of the message"


def test_a_headless_traceback_after_an_exception_is_its_own():
    # two pods' (or ranks') last frames pasted one after the other, no Traceback headers
    one = [
        '  File "/x/sglang/srt/server_args.py", line 5163, in check_server_args',
        "    assert self.moe_dense_tp_size in {",
        "AssertionError: moe_dense_tp_size only support 1 and None currently",
    ]
    tracebacks = scan([*one, *one]).tracebacks
    assert [t.exception_message for t in tracebacks] == [
        "moe_dense_tp_size only support 1 and None currently"
    ] * 2


def test_frames_whose_leading_path_the_paste_cut_are_still_frames():
    # `  File "/home/u/env/lib/python3.12/site-packages/` trimmed off by hand
    cut = [
        'sglang/multimodal_gen/utils.py", line 169, in parse_args',
        "   args = self._pull_args_from_config(args)",
        'sglang/multimodal_gen/utils.py", line 298, in _pull_args_from_config',
        "   command =  args_before_config[0]",
        "IndexError: list index out of range",
    ]
    (traceback,) = scan(cut).tracebacks
    assert [f.function for f in traceback.frames] == ["parse_args", "_pull_args_from_config"]
    assert traceback.frames[1].code == "command =  args_before_config[0]"
    assert traceback.exception_type == "IndexError"
    # the same words inside a log record are no frame
    record = ['[2026-01-01 10:00:00] loaded from cfg.py", line 3, in main']
    assert scan(record).tracebacks == []


def test_usage_dump_is_tied_to_its_error_line_and_token_usage_is_not_usage():
    lines = [
        "[2026-02-23 18:05:01 TP0] Decode batch, #running-req: 1, token usage: 0.82, #queue-req: 0",
        "usage: sglang serve [-h] --model-path MODEL_PATH",
        "                    [--tp-size TP_SIZE]",
        "sglang serve: error: unrecognized arguments: --num-speculative-tokens 4",
    ]
    log = scan(lines)
    assert len(log.usage_dumps) == 1
    dump = log.usage_dumps[0]
    assert dump.first.number == 2 and dump.error.number == 4 and dump.length == 3


def test_server_args_record_is_parsed_into_settings():
    body = (
        "server_args=ServerArgs(model_path='/models/Kimi-K2.5', tp_size=8, "
        "speculative_algorithm='EAGLE3', speculative_num_steps=3, mem_fraction_static=0.85, "
        "enable_dp_attention=False, cuda_graph_bs=[1, 2, 4], json_model_override_args='{}', "
        "dtype=torch.bfloat16)"
    )
    settings = parse_server_args(body)
    assert settings["tp_size"] == 8
    assert settings["speculative_algorithm"] == "EAGLE3"
    assert settings["mem_fraction_static"] == 0.85
    assert settings["cuda_graph_bs"] == [1, 2, 4]
    assert settings["dtype"] == "torch.bfloat16"
    log = scan([f"[2026-02-23 18:05:01] {body}"])
    assert log.server_args["tp_size"] == 8 and log.startup_began


def test_a_server_args_record_shortened_by_hand_is_still_read():
    """Users cut the long record with `...` when they paste it (a positional argument
    after keywords, so the record no longer parses as written)."""
    body = "server_args=ServerArgs(model_path='/m', tp_size=8, speculative_algorithm='EAGLE', ...)"
    assert parse_server_args(body) == {
        "model_path": "/m",
        "tp_size": 8,
        "speculative_algorithm": "EAGLE",
    }
    assert parse_server_args("server_args=ServerArgs(model_path='/m', ..., tp_size=2)") == {
        "model_path": "/m",
        "tp_size": 2,
    }
    assert parse_server_args("server_args=ServerArgs(model_path='/m', tp_size=") is None


def test_candidates_keep_context_and_the_tail_is_bounded():
    lines = [f"line {i}" for i in range(100)] + ["an error here"] + ["after 1", "after 2"]
    log = scan(lines)
    assert [c.number for c in log.candidates] == [101]
    context = [ln.number for ln in log.context[101]]
    assert context == [98, 99, 100, 101, 102, 103]
    assert len(log.tail) == 40 and log.tail[-1].number == 103
    assert log.summary.lines == 103


def test_frames_a_user_left_out_with_an_ellipsis_do_not_end_the_traceback():
    lines = [
        "Traceback (most recent call last):",
        '  File "/x/sglang/srt/server.py", line 257, in launch_server',
        "    tokenizer_manager = TokenizerManager(server_args, port_args)",
        '  File "/x/sglang/srt/managers/tokenizer_manager.py", line 75, in __init__',
        "...",
        "KeyError: 'rope_type'",
    ]
    (tb,) = scan(lines).tracebacks
    assert tb.exception_type == "KeyError"
    assert [f.function for f in tb.frames] == ["launch_server", "__init__"]


def test_an_ellipsis_with_no_frame_above_it_starts_no_traceback():
    log = scan(
        ["Traceback (most recent call last):", "...", "[2026-01-01 10:00:00] Server started"]
    )
    assert [t.exception_type for t in log.tracebacks if t.exception_type] == []


def test_a_frame_path_elided_to_its_tail_is_read_as_sglangs_when_sglang_has_that_file():
    pasted = [
        'File ".../layers/rotary_embedding/base.py", line 372, in forward_cuda',
        "    q_rope = query.view(batch_size, -1, self.head_size)",
        'File ".../somepkg/not_sglang.py", line 9, in helper',
        "    x = y.view(2, -1)",
        "RuntimeError: shape '[16, -1, 64]' is invalid for input of size 256",
    ]
    (traceback,) = scan(pasted).tracebacks
    assert traceback.frames[0].file == ".../sglang/srt/layers/rotary_embedding/base.py"
    assert traceback.frames[1].file == ".../somepkg/not_sglang.py"  # no such SGLang file


def test_an_elided_path_of_one_file_name_is_left_as_printed():
    # `.../utils.py` alone could be any package's
    (traceback,) = scan(
        ['File ".../utils.py", line 3, in f', "    g()", "ValueError: bad"]
    ).tracebacks
    assert traceback.frames[0].file == ".../utils.py"


def test_no_literal_of_the_fast_path_is_on_a_routine_serving_line():
    """The fast path feeds the Scanner every line holding one of its literals (rule triggers,
    scanner markers, failure signals): one a healthy server's routine lines hold (its batch
    lines, its requests' and health polls' access lines: millions in a long log) would read
    the log line by line. Checked on the benchmark log's body and on those lines of the
    healthy logs of fixtures/negative."""
    import random
    from pathlib import Path

    from analyzer.engine.literal_scan import finder_for
    from analyzer.engine.survival import MARKERS
    from analyzer.rulebook.vocabulary import all_triggers, load_rules
    from benchmarks.generate_log import body_lines

    finder = finder_for([*all_triggers(load_rules()), *MARKERS])
    body = body_lines(random.Random(0))
    routine = [next(body) for _ in range(3000)]
    root = Path(__file__).resolve().parent.parent / "fixtures" / "negative"
    for log in sorted(root.glob("*.log")):
        routine += [
            line
            for line in log.read_text("utf-8", errors="replace").splitlines()
            if "Decode batch" in line
            or "Prefill batch" in line
            or ('" 200 OK' in line and ('"POST ' in line or "/health" in line))
        ]
    assert len(routine) > 3000
    held = [line for line in routine if finder.ends(memoryview(line.encode()))]
    assert held == [], held[:3]

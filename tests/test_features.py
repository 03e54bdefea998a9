"""SGLang features as data (analyzer/catalogs/features.toml): the flags an error names by a
feature's name or by the feature's code in its traceback."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from analyzer.core.model import Frame, Line, Traceback
from analyzer.pipeline import analyze
from analyzer.sglang.catalog import all_catalogs, load_catalog
from analyzer.sglang.error_catalog import load_error_catalog, shipped_error_versions
from analyzer.sglang.features import (
    feature_phase,
    features,
    frame_flags,
    phrase_flags,
    traceback_flags,
)
from analyzer.sglang.flag_history import shipped_history
from analyzer.sglang.guarded_code import guarded_code_for, shipped_guarded_versions

PACKAGE = "/usr/lib/python3/dist-packages/sglang/srt/"


@pytest.mark.parametrize("feature", features(), ids=lambda f: f.flags[0])
def test_every_feature_names_flags_of_the_newest_release_as_it_spells_them(feature):
    newest = load_catalog()
    for flag in feature.flags:
        assert newest.canonical(flag) == flag
        assert all(c.canonical(flag) for c in all_catalogs()), flag
    assert feature.source


PHRASED = [f for f in features() if f.phrases]


@pytest.mark.parametrize("feature", PHRASED, ids=lambda f: f.flags[0])
def test_every_phrase_is_how_sglang_names_the_feature(feature):
    """A phrase is backed by a shipped release: a raise site whose message holds it reads one
    of the feature's flags, or the flag's own help says it; else the feature's own code
    (frames) backs the entry. A phrase only SGLang's code says is the next test's."""
    if not (_backed_by_catalogs(feature) or feature.frames):
        pytest.skip("backed by SGLang's code only: test_a_phrase_said_only_by_sglangs_code")


@pytest.mark.sglang
@pytest.mark.parametrize("feature", PHRASED, ids=lambda f: f.flags[0])
def test_a_phrase_said_only_by_sglangs_code_is_in_it(feature):
    """A file of an installed release whose code the mined map (catalogs/guarded-*.json)
    guards by one of the feature's flags says the phrase (ReasonerGrammarBackend, built only
    with --reasoning-parser, says `constrained reasoning`)."""
    if _backed_by_catalogs(feature) or feature.frames:
        return
    sources = _release_sources()
    if not sources:
        pytest.skip("no SGLang release sources: run scripts/install-sglang.sh")
    assert any(_guarded_code_says(sources, feature.flags, p) for p in feature.phrases), feature


def _backed_by_catalogs(feature) -> set[str]:
    history = shipped_history()
    helps = " ".join(load_catalog().spec(f).help.lower() for f in feature.flags)
    backed = {p for p in feature.phrases if p in helps}
    for version in shipped_error_versions():
        catalog = load_catalog(version)
        for site in load_error_catalog(version).entries:
            text = site.message.lower()
            flags = {history.spelling(f, catalog) for f in site.flags}
            backed.update(p for p in feature.phrases if p in text and flags & set(feature.flags))
    return backed


def _release_sources() -> list[Path]:
    """Folders holding `<version>/sglang`: where scripts/install-sglang.sh puts them, inside
    this checkout or beside the SGLang Python the sglang-marked run is given."""
    places = [Path(__file__).resolve().parent.parent / ".sglang" / "releases"]
    python = os.environ.get("LOGANALYZE_SGLANG_PYTHON")
    if python:  # <home>/venv/bin/python -> <home>/releases
        places.append(Path(python).parent.parent.parent / "releases")
    return [p for p in places if p.is_dir()]


def _guarded_code_says(sources: list[Path], flags: tuple[str, ...], phrase: str) -> bool:
    for version in shipped_guarded_versions():
        source = next((b / version / "sglang" for b in sources if (b / version).is_dir()), None)
        if source is None:
            continue
        files = guarded_code_for(version).maps[0][1]
        for rel, functions in files.items():
            needs = {n[0] for guards in functions.values() for g in guards for n in g["needs"]}
            if needs & set(flags) and phrase in (source / rel).read_text("utf-8").lower():
                return True
    return False


def test_a_message_names_features_by_their_sglang_names():
    text = "Currently HybridAttentionBackend does not support speculative decoding."
    assert phrase_flags(text) == [
        "--prefill-attention-backend",
        "--decode-attention-backend",
        "--speculative-algorithm",
    ]
    assert phrase_flags("multi-node data parallel is not supported") == ["--nnodes", "--dp-size"]
    # a word start is needed: "adp attention" is no "dp attention"
    assert phrase_flags("the adp attention kernel") == []
    assert phrase_flags("") == []
    # a hint for when the feature is on names no feature that ran
    budget = (
        "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.1. "
        "If using speculative decoding, draft weights are now counted."
    )
    assert phrase_flags(budget) == []
    assert phrase_flags("When you use dp attention, set --dp-size.") == []
    # a placeholder layer for another pipeline stage exists only with --pp-size > 1
    missing = "'PPMissingLayer' object has no attribute 'layer_scatter_modes'"
    assert phrase_flags(missing) == ["--pp-size"]
    assert phrase_flags("'MissingLayer' object has no attribute 'weight'") == []


def _traceback(*frames: tuple[str, str]) -> Traceback:
    line = Line("x.log", 1, "RuntimeError: boom", "RuntimeError: boom")
    built = tuple(Frame(PACKAGE + file, 10, function, "") for file, function in frames)
    return Traceback((line,), built, "RuntimeError", "boom")


def test_a_traceback_through_a_features_code_names_its_flag():
    deterministic = _traceback(
        ("layers/linear.py", "forward"),
        ("batch_invariant_ops/batch_invariant_ops.py", "matmul_persistent"),
    )
    assert frame_flags(deterministic) == ["--enable-deterministic-inference"]
    mixed = _traceback(
        ("managers/scheduler.py", "get_new_batch_prefill"),
        ("managers/schedule_batch.py", "mix_with_running"),
    )
    assert frame_flags(mixed) == ["--enable-mixed-chunk"]
    hierarchical = _traceback(
        ("mem_cache/hiradix_cache.py", "_build_host_pool"),
        ("mem_cache/memory_pool_host.py", "__init__"),
    )
    assert frame_flags(hierarchical) == ["--enable-hierarchical-cache"]
    # the host pool alone also backs other features (retraction backup, hisparse)
    assert frame_flags(_traceback(("mem_cache/memory_pool_host.py", "__init__"))) == []
    assert frame_flags(_traceback(("layers/linear.py", "forward"))) == []
    assert frame_flags(None) == []
    # the MoE models enter the TBO forward only when the batch can run two-batch overlap
    tbo = _traceback(
        ("models/deepseek_v2.py", "forward"),
        ("batch_overlap/two_batch_overlap.py", "model_forward_maybe_tbo"),
    )
    assert frame_flags(tbo) == ["--enable-two-batch-overlap"]
    # other code of the file (the DP-attention preparer) runs without TBO
    preparer = _traceback(("batch_overlap/two_batch_overlap.py", "prepare_all_gather"))
    assert frame_flags(preparer) == []


def test_the_draft_path_is_named_only_for_weights_loaded_inside_a_draft_worker():
    draft = _traceback(
        ("speculative/eagle_worker.py", "__init__"),
        ("model_executor/model_runner.py", "load_model"),
        ("models/qwen3.py", "load_weights"),
    )
    assert frame_flags(draft) == ["--speculative-draft-model-path"]
    target = _traceback(
        ("model_executor/model_runner.py", "load_model"), ("models/qwen3.py", "load_weights")
    )
    assert frame_flags(target) == []
    # the draft worker's own forward after loading is not a weight load
    serving = _traceback(
        ("model_executor/model_runner.py", "load_model"),
        ("speculative/eagle_worker.py", "forward_batch_generation"),
    )
    assert frame_flags(serving) == []


def test_a_cuda_error_line_names_the_feature_its_traceback_ran_through(tmp_path: Path):
    """A line rule's match (cuda-error) gets the flags of the traceback its line ends."""
    log = tmp_path / "run.log"
    log.write_text(
        f'  File "{PACKAGE}layers/quantization/unquant.py", line 176, in apply\n'
        "    return F.linear(x, layer.weight, bias)\n"
        f'  File "{PACKAGE}batch_invariant_ops/batch_invariant_ops.py", line 315, in '
        "matmul_persistent\n"
        "    return _matmul_persistent_triton(a=a, b=b, bias=bias)\n"
        "triton.runtime.errors.OutOfResources: out of resource: shared memory, Required: "
        "131072, Hardware limit: 101376. Reducing block sizes or `num_stages` may help.\n"
    )
    root = analyze([str(log)]).incidents[0]
    assert root.rule_class == "cuda_error"
    assert root.offending_flags == ["--enable-deterministic-inference"]


MIXED_CHUNK_CRASH = (
    "[2025-12-01 09:00:10 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
    f'  File "{PACKAGE}managers/scheduler.py", line 1500, in get_new_batch_prefill\n'
    "    new_batch.mix_with_running(self.running_batch)\n"
    f'  File "{PACKAGE}managers/schedule_batch.py", line 1200, in mix_with_running\n'
    "    self.merge_batch(running_batch)\n"
    "RuntimeError: shapes of the merged batches differ\n"
)


@pytest.mark.parametrize(
    ("command", "named"),
    [
        ("", True),  # no command: the feature's code ran, so its flag was on
        ("python -m sglang.launch_server --model-path m --enable-mixed-chunk\n", True),
        # negatives: the shown command or server_args record leaves the flag off
        ("python -m sglang.launch_server --model-path m --tp-size 2\n", False),
        (
            "[2025-12-01 09:00:00] server_args=ServerArgs(model_path='m', enable_mixed_chunk=False)\n",
            False,
        ),
    ],
)
def test_a_features_frames_name_no_flag_the_command_leaves_off(tmp_path, command, named):
    log = tmp_path / "run.log"
    log.write_text(command + MIXED_CHUNK_CRASH)
    root = analyze([str(log)]).incidents[0]
    assert ("--enable-mixed-chunk" in root.offending_flags) is named


def test_an_exception_message_names_its_features_whatever_the_rule(tmp_path: Path):
    """A frameless exception line names --reasoning-parser by SGLang's own phrase for it."""
    line = (
        "ValueError: think_end_token '</think>' must encode to exactly one token for "
        "constrained reasoning."
    )
    lone = Traceback((Line("x.log", 1, line, line),), (), "ValueError", line.split(": ", 1)[1])
    assert traceback_flags(lone) == ["--reasoning-parser"]
    assert traceback_flags(None) == []


def test_a_request_too_long_for_the_context_names_context_length(tmp_path: Path):
    log = tmp_path / "client.log"
    log.write_text(
        '{"object":"error","message":"The input (61709 tokens) is longer than the model\'s '
        'context length (40960 tokens).","type":"BadRequestError","param":null,"code":400}\n'
    )
    (finding,) = analyze([str(log)]).incidents
    assert (finding.rule_class, finding.severity) == ("client_error", "info")
    assert finding.offending_flags == ["--context-length"]


TORCH = "/usr/lib/python3/dist-packages/torch/"


def _with_torch(*frames: tuple[str, str]) -> Traceback:
    """Frames of SGLang (relative to srt/) and of torch (`torch:` + path under torch/)."""
    line = Line("x.log", 1, "RuntimeError: boom", "RuntimeError: boom")
    built = tuple(
        Frame(TORCH + file[6:] if file.startswith("torch:") else PACKAGE + file, 10, function, "")
        for file, function in frames
    )
    return Traceback((line,), built, "RuntimeError", "boom")


def test_torch_compile_is_proven_only_by_sglangs_own_compile_of_the_model():
    # the graph runner calls patch_model's torch.compile(model.forward) directly
    compiled = _with_torch(
        ("model_executor/cuda_graph_runner.py", "run_once"),
        ("torch:_dynamo/eval_frame.py", "_fn"),
        ("models/deepseek_v2.py", "forward"),
    )
    assert frame_flags(compiled) == ["--enable-torch-compile"]
    assert feature_phase(compiled)[0] == "cuda-graph-capture"
    # 0.5.23's decode runner, cut inside dynamo (no model frame shown)
    newer = _with_torch(
        ("model_executor/runner/decode_cuda_graph_runner.py", "capture_one_shape"),
        ("torch:_dynamo/convert_frame.py", "__call__"),
    )
    assert frame_flags(newer) == ["--enable-torch-compile"]
    # an @torch.compile helper inside the model's forward, even while capturing
    helper = _with_torch(
        ("model_executor/cuda_graph_runner.py", "run_once"),
        ("models/llama.py", "forward"),
        ("layers/rotary_embedding.py", "forward_native"),
        ("torch:_dynamo/eval_frame.py", "_fn"),
    )
    assert frame_flags(helper) == [] and feature_phase(helper) is None
    # a compiled helper the runner calls itself, not the model
    own_helper = _with_torch(
        ("model_executor/cuda_graph_runner.py", "capture_one_batch_size"),
        ("torch:_dynamo/eval_frame.py", "_fn"),
        ("managers/overlap_utils.py", "resolve_future_token_ids"),
    )
    assert frame_flags(own_helper) == []
    # the piecewise runner compiles for --enable-piecewise-cuda-graph
    piecewise = _with_torch(
        ("model_executor/piecewise_cuda_graph_runner.py", "capture_one_batch_size"),
        ("torch:_dynamo/eval_frame.py", "_fn"),
    )
    assert frame_flags(piecewise) == []
    # 0.3-era: _to_torch switched vLLM's custom ops to their native forward
    line = Line("x.log", 1, "NotImplementedError", "NotImplementedError")
    native = Traceback(
        (line,),
        (
            Frame("/x/vllm/model_executor/custom_op.py", 14, "forward", ""),
            Frame("/x/vllm/model_executor/custom_op.py", 23, "forward_native", ""),
        ),
        "NotImplementedError",
        "",
    )
    assert frame_flags(native) == ["--enable-torch-compile"]
    assert feature_phase(native)[0] == "cuda-graph-capture"


def test_a_cut_traceback_caused_in_the_compiled_model_is_a_capture_failure(tmp_path: Path):
    log = tmp_path / "cut.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        f'  File "{PACKAGE}model_executor/cuda_graph_runner.py", line 300, in run_once\n'
        "    logits_output = forward(input_ids, forward_batch.positions, forward_batch)\n"
        f'  File "{TORCH}_dynamo/eval_frame.py", line 465, in _fn\n'
        "    return fn(*args, **kwargs)\n"
        "torch._dynamo.exc.Unsupported: call_function UserDefinedObjectVariable\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        f'  File "{PACKAGE}managers/scheduler.py", line 1800, in run_scheduler_process\n'
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank, dp_rank)\n"
        f'  File "{PACKAGE}managers/sched\n'
    )
    root = analyze([str(log)]).incidents[0]
    assert root.rule_class == "cuda_graph_capture"
    assert root.offending_flags == ["--enable-torch-compile"]

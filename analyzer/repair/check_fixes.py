"""Fixes read from the check SGLang failed: memory, speculative draft shapes, backends.

Each follows what SGLang's own code or message asks for (the docstrings cite the file and
function of SGLang 0.5.23); analyzer/repair/correct.py applies and validates the edits.
"""

from __future__ import annotations

from collections.abc import Callable

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import Edit, Finding
from analyzer.repair.fixes import FixContext, FixPlan, int_value, speculative_values

# --mem-fraction-static: a share of the GPU's memory; 0.95 leaves the least room SGLang's own
# reservations (activations, CUDA graphs: arg_groups/memory_hook.py) are sized from
MAX_FRACTION = 0.95
FRACTION_STEP = 0.05
DEFAULT_FRACTION = 0.88  # when neither the command nor the record says it
# the KV pool ran out of slots (mem_cache/allocation.py alloc_token_slots / alloc_for_extend:
# "Out of memory. Try to lower your batch size."): the settings that size a batch
BATCH_CAPS = ("--max-running-requests", "--chunked-prefill-size", "--max-prefill-tokens")
# the value in force, as the KV pool's sizing printed it: model_executor/pool_configurator.py
# __post_init__ "... Current value: mem_fraction_static=0.8", mem_cache/kv_cache_configurator.py
# _profile_available_bytes "... under --mem-fraction-static=0.3. Raise --mem-fraction-static
# above 0.412 (minimum viable ...)"
FRACTION_IN_FORCE = LazyPattern(
    r"(?:Current value: mem_fraction_static=|under --mem-fraction-static=)(?P<value>\d*\.?\d+)"
)
FRACTION_ASKED = LazyPattern(r"Raise --mem-fraction-static above (?P<value>\d*\.?\d+)")


def memory_fix(finding: Finding, ctx: FixContext) -> FixPlan:
    """Phase-aware memory edits; none when other processes hold the memory."""
    groups = finding.match.groups
    if groups.get("other_processes"):
        note = "free the GPUs first (see nvidia-smi), then rerun the same command"
        return FixPlan([], [note], outside_command=True)
    fraction = _float(ctx.value("--mem-fraction-static"))
    phase = groups.get("phase", "startup")
    if phase == "kv_cache":
        message = finding.match.line.body
        if fraction is None and (in_force := FRACTION_IN_FORCE.search(message)):
            fraction = _float(in_force["value"])
        asked = FRACTION_ASKED.search(message)
        least = _float(asked["value"]) if asked else None
        return _raise_fraction(fraction, least) or FixPlan([], _context_note(ctx))
    if phase == "kv_pool":
        return _lower_cap(ctx, BATCH_CAPS) or _raise_fraction(fraction) or FixPlan()
    if phase == "serving" and groups.get("prefill_caps"):
        caps = tuple(groups["prefill_caps"].split(" or "))
        if plan := _lower_cap(ctx, caps):
            return plan
    if phase in ("cuda_graph_capture", "serving"):
        base = fraction if fraction is not None else DEFAULT_FRACTION
        new = round(max(base - FRACTION_STEP, 0.5), 2)
        return FixPlan([Edit("set", "--mem-fraction-static", value=f"{new:g}")])
    return FixPlan()


def _raise_fraction(fraction: float | None, least: float | None = None) -> FixPlan | None:
    """More of the GPU for weights + KV pool, up to MAX_FRACTION; above `least` when
    SGLang names the smallest share that leaves the KV cache room."""
    if fraction is None or fraction >= MAX_FRACTION - 0.02:
        return None
    new = round(min(fraction + FRACTION_STEP, MAX_FRACTION), 2)
    if least is not None:
        if least + 0.01 > MAX_FRACTION:
            return None  # no share leaves room: the weights do not fit these GPUs
        new = max(new, round(least + 0.01, 2))
    return FixPlan([Edit("set", "--mem-fraction-static", value=f"{new:g}")])


def _lower_cap(ctx: FixContext, caps: tuple[str, ...]) -> FixPlan | None:
    """Halve the first of the caps the user set (a batch's tokens or requests)."""
    for flag in caps:
        if not ctx.typed(flag):
            continue
        value = int_value(ctx.value(flag))
        if value is None or value <= 1:
            continue
        new = value // 2
        note = f"{flag} {new}: half the tokens (or requests) a batch may take at once"
        return FixPlan([Edit("set", flag, value=str(new))], [note], [flag])
    return None


def _context_note(ctx: FixContext) -> list[str]:
    length = ctx.value("--context-length")
    if length:
        return [f"--context-length is {length}: a shorter context needs a smaller KV cache"]
    return []


# Attention backends whose source reads no speculative forward mode (no spec_info, no
# is_target_verify / is_draft_extend branch in layers/attention/<name>_backend.py); flex
# attention is refused outright (arg_groups/attention_hook.py
# handle_attention_backend_compatibility: "Speculative decoding is currently not supported
# with Flex Attention backend").
NO_SPECULATIVE_BACKENDS = ("torch_native", "flex_attention", "double_sparsity")
BACKEND_FLAGS = ("--attention-backend", "--prefill-attention-backend", "--decode-attention-backend")


def speculative_backend(finding: Finding, ctx: FixContext) -> FixPlan:
    """Drop the backend choice that has no speculative path: with none given SGLang picks
    the hardware's default (arg_groups/overrides.py _attention_backend_default ->
    get_default_attn_backend: fa3, flashinfer, triton, ... all of which handle the draft
    and verify batches)."""
    edits = [
        Edit("remove", flag)
        for flag in BACKEND_FLAGS
        if ctx.typed(flag) and (ctx.value(flag) or "") in NO_SPECULATIVE_BACKENDS
    ]
    if not edits:
        return FixPlan()
    note = (
        "without --attention-backend SGLang picks the GPU's default, which runs speculative batches"
    )
    return FixPlan(edits, [note], [e.flag for e in edits])


def default_diffusion_backend(finding: Finding, ctx: FixContext) -> FixPlan:
    """Drop the global --attention-backend a diffusion component's layer refused: with no
    selection each layer takes its declared default or the platform's (multimodal_gen/runtime/
    layers/attention/selector.py get_attn_backend, "platform default fallback"), while an
    explicit one is held to and raises `Attention backend 'X' does not implement ...`."""
    refused = finding.match.groups.get("backend", "")
    typed = (ctx.value("--attention-backend") or "").lower().replace("-", "_")
    if not refused or not ctx.typed("--attention-backend") or typed != refused.lower():
        return FixPlan()  # a per-component override chose it, or another backend failed
    if any(
        ctx.catalog.spec(ctx.catalog.canonical(a.flag) or a.flag) is None
        for a in ctx.command.arguments
    ):
        # the diffusion server's own flags (--num-gpus): the LLM flag catalog cannot judge
        # the rest of the command, and its repair would drop them
        return FixPlan()
    note = (
        "without --attention-backend each component takes its default backend; to keep "
        f"{refused} for the DiT, override the other components per component instead"
    )
    return FixPlan([Edit("remove", "--attention-backend")], [note], ["--attention-backend"])


# flags under which a layer is split by another degree than --tp-size (attention TP under DP
# attention, MoE TP under EP, a dense-MLP TP): the message's size then says nothing of --tp-size
OTHER_SPLITS = (
    "--dp-size", "--enable-dp-attention", "--ep-size", "--moe-dense-tp-size", "--attn-cp-size",
)  # fmt: skip


def whole_tp_split(finding: Finding, ctx: FixContext) -> FixPlan:
    """The largest smaller --tp-size whose split SGLang's check accepts, read from its message:
    distributed/utils.py ensure_divisibility `{numerator} is not divisible by {denominator}`
    (the dimension must divide by the TP degree; a power of two, as the heads of most models
    take) and quantization/fp8.py validate_block_quant_shapes `Weight output_partition_size =
    N is not divisible by weight quantization block_n = B` (each rank's width, the layer's
    width / TP, a multiple of the block)."""
    tp = int_value(ctx.value("--tp-size"))
    if tp is None or tp <= 1 or not ctx.typed("--tp-size"):
        return FixPlan()
    if any(ctx.typed(flag) for flag in OTHER_SPLITS):
        return FixPlan()
    groups = finding.match.groups
    if "block" in groups:
        size, block = int_value(groups.get("size")), int_value(groups.get("block"))
        if size is None or not block:
            return FixPlan()
        width = size * tp
        fits = [d for d in range(tp - 1, 0, -1) if tp % d == 0 and (width // d) % block == 0]
        why = f"{width} / {{new}} = {{share}} per rank, whole blocks of {block}"
    else:
        dimension, denominator = int_value(groups.get("numerator")), groups.get("denominator")
        if dimension is None or denominator != str(tp):
            return FixPlan()
        fits = [d for d in range(tp - 1, 0, -1) if dimension % d == 0 and d & (d - 1) == 0]
        width = dimension
        why = f"{dimension} / {{new}} = {{share}} per rank"
    if not fits or fits[0] == 1:
        return FixPlan()
    new = fits[0]
    note = (
        f"--tp-size {new}: "
        + why.format(new=new, share=width // new)
        + "; the weights must fit the fewer GPUs (the others can serve another replica)"
    )
    return FixPlan([Edit("set", "--tp-size", value=str(new))], [note], ["--tp-size"])


TRIO = ("--speculative-num-steps", "--speculative-eagle-topk", "--speculative-num-draft-tokens")


def chain_draft(finding: Finding, ctx: FixContext) -> FixPlan:
    """A topk the path refuses: a chain (topk 1), whose draft tokens SGLang sets to steps + 1
    (arg_groups/speculative_hook.py _handle_eagle_family: "speculative_num_draft_tokens is
    adjusted to speculative_num_steps + 1 when speculative_eagle_topk == 1")."""
    topk = int_value(ctx.value("--speculative-eagle-topk"))
    if topk is None or topk <= 1:
        return FixPlan()
    edits = [Edit("set", "--speculative-eagle-topk", value="1")]
    steps = int_value(ctx.value("--speculative-num-steps"))
    if steps is not None and ctx.typed("--speculative-num-draft-tokens"):
        edits.append(Edit("set", "--speculative-num-draft-tokens", value=str(steps + 1)))
    note = "--speculative-eagle-topk 1: a chain draft, which every speculative path supports"
    return FixPlan(edits, [note])


def fit_draft_tree(finding: Finding, ctx: FixContext) -> FixPlan:
    """Draft tokens within the tree's candidates: speculative/eagle_utils.py
    organize_draft_results takes torch.topk(scores, num_draft_token - 1) of the
    topk + (num_steps - 1) x topk^2 candidates."""
    steps = int_value(ctx.value("--speculative-num-steps"))
    topk = int_value(ctx.value("--speculative-eagle-topk"))
    tokens = int_value(ctx.value("--speculative-num-draft-tokens"))
    if steps is None or topk is None or tokens is None or steps < 1 or topk < 1:
        return FixPlan()
    most = topk + (steps - 1) * topk * topk + 1
    if tokens <= most:
        return FixPlan()
    note = f"at most topk + (steps - 1) x topk^2 + 1 = {most} draft tokens"
    return FixPlan(
        [Edit("set", "--speculative-num-draft-tokens", value=str(most))], [note], list(TRIO)
    )


def explicit_speculative(finding: Finding, ctx: FixContext) -> FixPlan:
    """Give the trio SGLang would otherwise choose from the model's config.json:
    server_args.py auto_choose_speculative_params (0.5.6-0.5.13) reads the architecture when
    --speculative-num-steps is unset; its answer for most models is the chain (3, 1, 4)."""
    values = speculative_values(ctx)
    edits = [Edit("add", flag, value=values[flag]) for flag in TRIO if flag in values]
    if not edits:
        return FixPlan()
    note = "set explicitly, SGLang no longer reads the model's config to choose them"
    return FixPlan(edits, [note], list(TRIO))


# modelopt_quant.py ModelOptFp8Config.from_config (0.5.6.post2): the checkpoint's quant_algo
# is not FP8, "... only supports static FP8 quantization in SGLang. For FP4 quantization, use
# ModelOptFp4Config. ..."
METHOD_REFUSES_ALGO = LazyPattern(r"\w+Config only supports ")


def checkpoint_quantization(finding: Finding, ctx: FixContext) -> FixPlan:
    """Drop a --quantization method that refused the checkpoint's own quantization algorithm:
    without it SGLang reads the algorithm from the checkpoint and picks the method
    (configs/model_config.py _parse_quant_hf_config / _parse_modelopt_quant_config: FP4 and
    NVFP4 -> modelopt_fp4, FP8 -> modelopt_fp8, MIXED_PRECISION -> modelopt_mixed or w4afp8).
    A checkpoint with no quantization config (`Cannot find ...`) keeps the flag: dropping it
    would serve the model unquantized."""
    if not METHOD_REFUSES_ALGO.search(finding.match.groups.get("message", "")):
        return FixPlan()
    if not ctx.typed("--quantization"):
        return FixPlan()
    note = "without --quantization SGLang picks the method from the checkpoint's own config"
    return FixPlan([Edit("remove", "--quantization")], [note], ["--quantization"])


def _float(value: str | None) -> float | None:
    try:
        return float(value) if value is not None else None
    except ValueError:
        return None


CHECK_FIXES: dict[str, Callable[[Finding, FixContext], FixPlan]] = {
    "memory_fix": memory_fix,
    "speculative_backend": speculative_backend,
    "chain_draft": chain_draft,
    "fit_draft_tree": fit_draft_tree,
    "explicit_speculative": explicit_speculative,
    "checkpoint_quantization": checkpoint_quantization,
    "default_diffusion_backend": default_diffusion_backend,
    "whole_tp_split": whole_tp_split,
}

"""Mutation harness for corrected commands: break valid launches, let real SGLang fail, check
that loganalyze's corrected command is one real SGLang then accepts.

    LOGANALYZE_SGLANG_PYTHON=.sglang/venv/bin/python .venv/bin/python benchmarks/fix_fuzz.py
    ... benchmarks/fix_fuzz.py --sample 40 --floor 0.9      # CI: a seeded sample, a floor

From valid launch commands (EAGLE-3 on a DeepSeek/Kimi-like target, MTP/NEXTN, NGRAM,
STANDALONE, an EAGLE tree, dp-attention, multi-node, LoRA, quantized, serving options), each
checked to pass real SGLang first, seeded mutations make the mistakes users make: vLLM and
older-release names, underscores, the case of a choice, a missing companion flag, a typo,
a divisibility broken, SI suffixes, a switch given a value, Python instead of JSON in a
config flag, a speculative option the device or algorithm lacks, two exclusive flags.
Newer kinds: SGLang's words cut or spelled out (`--spec-algorithm`), a backend or dtype under
its library's name (`torch-flex`, `float8_e4m3fn`), an option an older release spelled
otherwise (`--enable-gdn-replayssm-spec`), a character SGLang's check forbids in a value.
Every mutant runs through SGLang's own parsing and resolution on CPU (`verify.run_batch`:
one SGLang import, a fork per command) to get its real failure output; loganalyze reads
that output (with the command, as `--command` gives it) and its corrected command runs
through real SGLang again. Per mutation kind it prints: mutants, those SGLang rejected,
class right, flags right (the mutated flags among the offending ones), a command offered,
then over the failures with a one- or two-edit fix: accepted (the corrected command passes
SGLang), accepted and intent kept (every flag the user typed is still there, as itself or
its counterpart, and the value the mutation broke comes back), intent lost (accepted, but
something typed is gone: SGLang accepts an empty command too). A mutation names what it
broke, so a drop where SGLang has the option is a loss; only a second wish the mutation
added that conflicts with the first may go. Exit 1 when accepted-and-intent-kept is below
--floor.
"""

from __future__ import annotations

import argparse
import json
import random
import shlex
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyzer.pipeline import Options, analyze  # noqa: E402
from analyzer.sglang.catalog import FlagCatalog, load_catalog  # noqa: E402
from analyzer.sglang.launch_command import parse_launch_command  # noqa: E402
from analyzer.sglang.verify import run_batch, sglang_argv, sglang_python  # noqa: E402
from benchmarks.fix_mutations import LAUNCH, MUTATIONS, Mutant  # noqa: E402

LLAMA = "fixtures/models/llama-target"
EAGLE3 = "fixtures/models/eagle3-draft"
EAGLE = "fixtures/models/eagle-draft"
DEEPSEEK = "{models}/deepseek-v3"
LORA = "{models}/lora-adapter"
TRIES = 40  # draws per kind before it counts as exhausted
CHAIN = "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"

BASES: dict[str, str] = {
    "eagle3_deepseek": f"--model-path {DEEPSEEK} --trust-remote-code --tp-size 2 "
    f"--speculative-algorithm EAGLE3 --speculative-draft-model-path {EAGLE3} {CHAIN} "
    "--mem-fraction-static 0.85",
    "mtp_nextn": f"--model-path {DEEPSEEK} --trust-remote-code --speculative-algorithm NEXTN "
    "--speculative-num-steps 1 --speculative-eagle-topk 1 --speculative-num-draft-tokens 2",
    "ngram": f"--model-path {LLAMA} --speculative-algorithm NGRAM "
    "--speculative-num-draft-tokens 8 --max-running-requests 32",
    "standalone": f"--model-path {LLAMA} --speculative-algorithm STANDALONE "
    f"--speculative-draft-model-path {LLAMA} {CHAIN}",
    "eagle_tree": f"--model-path {LLAMA} --speculative-algorithm EAGLE "
    f"--speculative-draft-model-path {EAGLE} --speculative-num-steps 3 "
    "--speculative-eagle-topk 4 --speculative-num-draft-tokens 8 --context-length 4096",
    "dp_attention": f"--model-path {DEEPSEEK} --trust-remote-code --tp-size 4 --attn-dp-size 4 "
    "--enable-dp-attention --chunked-prefill-size 4096",
    "multi_node": f"--model-path {LLAMA} --tp-size 4 --nnodes 2 --node-rank 0 "
    "--dist-init-addr 10.0.0.1:5000 --mem-fraction-static 0.8",
    "lora": f"--model-path {LLAMA} --enable-lora --lora-paths a={LORA} --max-lora-rank 16 "
    "--lora-target-modules all --max-loras-per-batch 4",
    "quantized": f"--model-path {LLAMA} --quantization fp8 --kv-cache-dtype fp8_e4m3 "
    "--dtype bfloat16 --mem-fraction-static 0.85",
    "serving": f"--model-path {LLAMA} --context-length 4096 --max-running-requests 64 "
    "--page-size 16 --chunked-prefill-size 2048 "
    "--json-model-override-args '{{\"rope_theta\": 20000}}'",
}

DEEPSEEK_CONFIG = {
    "architectures": ["DeepseekV3ForCausalLM"],
    "model_type": "deepseek_v3",
    "hidden_size": 256,
    "intermediate_size": 512,
    "moe_intermediate_size": 128,
    "num_hidden_layers": 2,
    "num_nextn_predict_layers": 1,
    "num_attention_heads": 4,
    "num_key_value_heads": 4,
    "n_shared_experts": 1,
    "n_routed_experts": 8,
    "num_experts_per_tok": 2,
    "routed_scaling_factor": 2.5,
    "kv_lora_rank": 64,
    "q_lora_rank": 96,
    "qk_rope_head_dim": 16,
    "v_head_dim": 32,
    "qk_nope_head_dim": 32,
    "topk_method": "noaux_tc",
    "n_group": 2,
    "topk_group": 1,
    "first_k_dense_replace": 1,
    "moe_layer_freq": 1,
    "scoring_func": "sigmoid",
    "norm_topk_prob": True,
    "hidden_act": "silu",
    "max_position_embeddings": 8192,
    "rms_norm_eps": 1e-6,
    "rope_theta": 10000,
    "vocab_size": 32000,
    "bos_token_id": 0,
    "eos_token_id": 1,
    "torch_dtype": "bfloat16",
    "tie_word_embeddings": False,
    "transformers_version": "4.46.0",
    "attention_bias": False,
}
LORA_CONFIG = {
    "r": 16,
    "lora_alpha": 32,
    "target_modules": ["q_proj", "v_proj"],
    "peft_type": "LORA",
    "base_model_name_or_path": "llama-target",
    "task_type": "CAUSAL_LM",
}


@dataclass
class Outcome:
    mutant: Mutant
    rejected: bool = False
    rule_class: str | None = None
    flags: list[str] = field(default_factory=list)
    corrected: str | None = None
    fixed: bool = False
    message: str = ""
    intent_kept: bool = False
    lost: list[str] = field(default_factory=list)


def mutants(count: int, seed: int, models: Path) -> list[Mutant]:
    """`count` distinct mutants, the kinds in turn (a kind with no new mutant left for any
    base drops out), bases drawn by the seeded generator."""
    rng = random.Random(seed)
    bases = {name: shlex.split(args.format(models=models)) for name, args in BASES.items()}
    found: list[Mutant] = []
    seen: set[str] = set()
    active = list(MUTATIONS)
    while len(found) < count and active:
        for mutation in list(active):
            for _ in range(TRIES):
                base = rng.choice(sorted(bases))
                words = [*bases[base], "--device", "cpu"]
                mutant = mutation(rng, base, words)
                if mutant is not None and mutant.command not in seen:
                    mutant.intended = words
                    seen.add(mutant.command)
                    found.append(mutant)
                    break
            else:
                active.remove(mutation)
            if len(found) == count:
                break
    return found


# ---- running ----------------------------------------------------------------------------


def _scratch_models(folder: Path) -> Path:
    (folder / "deepseek-v3").mkdir(parents=True, exist_ok=True)
    (folder / "deepseek-v3" / "config.json").write_text(json.dumps(DEEPSEEK_CONFIG))
    (folder / "lora-adapter").mkdir(exist_ok=True)
    (folder / "lora-adapter" / "adapter_config.json").write_text(json.dumps(LORA_CONFIG))
    return folder


def _sglang(commands: list[str], python: str, scratch: Path, jobs: int) -> list:
    argvs = [sglang_argv(c, scratch) for c in commands]
    version, runs = run_batch(argvs, python, timeout=120, jobs=jobs)
    if version is None:
        raise SystemExit(f"sglang could not be run with {python}")
    return runs


def run(count: int, seed: int, jobs: int, python: str, verbose: bool) -> list[Outcome]:
    with tempfile.TemporaryDirectory(prefix="fix-fuzz-") as tmp:
        scratch = Path(tmp)
        models = _scratch_models(scratch / "models")
        bases = [f"{LAUNCH} {args.format(models=models)} --device cpu" for args in BASES.values()]
        for name, result in zip(BASES, _sglang(bases, python, scratch, jobs), strict=True):
            if result is None or result.code != 0:
                raise SystemExit(f"base command {name} does not pass sglang: {result}")
        found = mutants(count, seed, models)
        outcomes = [Outcome(m) for m in found]
        runs = _sglang([m.command for m in found], python, scratch, jobs)
        corrected: list[Outcome] = []
        for index, (outcome, result) in enumerate(zip(outcomes, runs, strict=True)):
            if result is None or result.code == 0:
                continue
            outcome.rejected = True
            log = scratch / f"mutant-{index}.log"
            log.write_text(result.output)
            report = analyze([str(log)], Options(command=outcome.mutant.command))
            if not report.incidents:
                continue
            root = report.incidents[0]
            outcome.rule_class = root.rule_class
            outcome.flags = list(root.offending_flags)
            outcome.corrected = root.corrected_command
            outcome.message = (
                result.output.strip().splitlines()[-1] if result.output.strip() else ""
            )
            if root.corrected_command:
                corrected.append(outcome)
        checks = _sglang([o.corrected for o in corrected if o.corrected], python, scratch, jobs)
        catalog = load_catalog()
        for outcome, result in zip(corrected, checks, strict=True):
            outcome.fixed = result is not None and result.code == 0
            outcome.lost = intent_lost(outcome.mutant, outcome.corrected or "", catalog)
            outcome.intent_kept = outcome.fixed and not outcome.lost
            if not outcome.fixed and result is not None:
                outcome.message += " || then: " + (result.output.strip().splitlines() or [""])[-1]
    if verbose:
        for outcome in outcomes:
            if outcome.rejected and not (
                outcome.intent_kept and _class_ok(outcome) and _flags_ok(outcome)
            ):
                print(f"- {outcome.mutant.kind} [{outcome.mutant.base}] {outcome.mutant.command}")
                print(f"    class {outcome.rule_class} flags {outcome.flags}")
                print(f"    sglang: {outcome.message[:300]}")
                print(f"    corrected: {outcome.corrected}")
                if outcome.lost:
                    print(f"    intent lost: {', '.join(outcome.lost)}")
    return outcomes


def intent_lost(mutant: Mutant, corrected: str, catalog: FlagCatalog) -> list[str]:
    """What the corrected command no longer says of what the user asked for: a flag typed
    (kept from the base command, or the one the mutation broke) with no counterpart, or the
    value the mutation broke not restored."""
    typed = parse_launch_command(mutant.command, catalog.takes_value)
    base = parse_launch_command(f"{LAUNCH} {shlex.join(mutant.intended)}", catalog.takes_value)
    fixed = parse_launch_command(corrected, catalog.takes_value) if corrected else None
    if typed is None or base is None or fixed is None:
        return ["no command"]
    have = {_name(a.flag, catalog): a.value for a in fixed.arguments}
    meant = {_name(a.flag, catalog) for a in base.arguments}
    kept = [f for a in typed.arguments if (f := _name(a.flag, catalog)) in meant]
    lost = [f for f in dict.fromkeys([*kept, *mutant.values]) if f not in have]
    lost = [f for f in lost if f not in mutant.may_drop]
    for flag, value in mutant.values.items():
        if flag in have and value is not None and not _same(have[flag], value):
            lost.append(f"{flag} {value} (got {have[flag]})")
    return lost


def _name(flag: str, catalog: FlagCatalog) -> str:
    return catalog.canonical(flag) or flag


def _same(got: str | None, wanted: str) -> bool:
    if got is None:
        return False
    try:
        return float(got) == float(wanted)
    except ValueError:
        return got == wanted


def _class_ok(outcome: Outcome) -> bool:
    return outcome.rule_class == outcome.mutant.expect_class


def _flags_ok(outcome: Outcome) -> bool:
    return set(outcome.mutant.expect_flags) <= set(outcome.flags)


def _share(part: int, whole: int) -> str:
    return f"{part}/{whole} ({100 * part / whole:.0f}%)" if whole else "-"


def table(outcomes: list[Outcome]) -> tuple[str, float, float, float, float]:
    """The per-kind table and the overall class, flags, accepted and accepted-with-intent
    shares (the last two over the failures with a one- or two-edit fix)."""
    rows = [
        "| mutation | mutants | rejected | class | flags | command offered | accepted | "
        "accepted and intent kept | intent lost |"
    ]
    rows.append("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    kinds = sorted({o.mutant.kind for o in outcomes})
    totals = [0] * 9
    for kind in [*kinds, "all"]:
        group = [o for o in outcomes if kind in ("all", o.mutant.kind)]
        rejected = [o for o in group if o.rejected]
        small = [o for o in rejected if o.mutant.small_fix]
        counts = (
            len(group),
            len(rejected),
            sum(_class_ok(o) for o in rejected),
            sum(_flags_ok(o) for o in rejected),
            sum(o.corrected is not None for o in rejected),
            sum(o.fixed for o in small),
            len(small),
            sum(o.intent_kept for o in small),
            sum(o.fixed and bool(o.lost) for o in small),
        )
        if kind == "all":
            totals = list(counts)
        rows.append(
            f"| {kind} | {counts[0]} | {counts[1]} | {_share(counts[2], counts[1])} | "
            f"{_share(counts[3], counts[1])} | {_share(counts[4], counts[1])} | "
            f"{_share(counts[5], counts[6])} | {_share(counts[7], counts[6])} | "
            f"{_share(counts[8], counts[6])} |"
        )
    class_share = totals[2] / totals[1] if totals[1] else 0.0
    flag_share = totals[3] / totals[1] if totals[1] else 0.0
    fix_share = totals[5] / totals[6] if totals[6] else 0.0
    kept_share = totals[7] / totals[6] if totals[6] else 0.0
    return "\n".join(rows), class_share, flag_share, fix_share, kept_share


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sample", type=int, default=320, help="how many mutants")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--jobs", type=int, default=2, help="SGLang checks at a time")
    parser.add_argument(
        "--floor", type=float, default=None, help="least share accepted with intent kept (0..1)"
    )
    parser.add_argument("--python", default=None, help="SGLang's python (default: as verify)")
    parser.add_argument("-v", "--verbose", action="store_true", help="list every miss")
    args = parser.parse_args(argv)
    python = args.python or sglang_python()
    if python is None:
        print("fix_fuzz: no SGLang (install loganalyze[sglang] or set LOGANALYZE_SGLANG_PYTHON)")
        return 2
    started = time.monotonic()
    outcomes = run(args.sample, args.seed, args.jobs, python, args.verbose)
    text, class_share, flag_share, fix_share, kept_share = table(outcomes)
    print(text)
    print(
        f"\nclass {class_share:.1%}, flags {flag_share:.1%}, accepted {fix_share:.1%}, "
        f"accepted and intent kept {kept_share:.1%} "
        f"({len(outcomes)} mutants over {len(BASES)} bases, seed {args.seed}, "
        f"{time.monotonic() - started:.0f} s)"
    )
    if args.floor is not None and kept_share < args.floor:
        print(f"accepted and intent kept {kept_share:.1%} is below the floor {args.floor:.0%}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

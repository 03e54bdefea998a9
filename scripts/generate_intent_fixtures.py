"""Generate fixtures/real/intent_* from CPU runs of real SGLang: silent misconfigurations.

Run from the repository root with the Python of an environment that has SGLang 0.5.23
installed (never the project's own environment):

    /work/venvs/sglang/bin/python scripts/generate_intent_fixtures.py            # all cases
    /work/venvs/sglang/bin/python scripts/generate_intent_fixtures.py --only NAME
    /work/venvs/sglang/bin/python scripts/generate_intent_fixtures.py --check    # verify only

Each case launches `python -m sglang.launch_server --model-path fixtures/models/llama-target
--device cpu <flags>` exactly as scripts/generate_real_fixtures.py does (same environment,
timeout and capture; its helpers are reused). These launches do not fail where the flags
are: SGLang accepts them, prints a warning or nothing, and the run ends at the tokenizer of
the config-only model folder. So the sidecar's [expect] names that root cause, and each
expected warning is a `[[warnings]]` table read by tests/test_intent.py: the rule, the
flags it names, and the corrected command.

A corrected command is verified the way the real-fixture generator verifies: SGLang's own
parsing, resolution and check_server_args in a fresh subprocess must pass, and, when the
warning is one SGLang prints, the same resolution run must no longer print it (`gone`):
the command now says what runs. `verified = true` is written only when both hold.
"""

from __future__ import annotations

import argparse
import shlex
import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import generate_real_fixtures as real  # noqa: E402

ROOT = real.ROOT
REAL = real.REAL
GENERATOR = "scripts/generate_intent_fixtures.py"
T = real.TARGET
E3 = real.EAGLE3
SPEC_3_1_4 = "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4"
TOKENIZER = "ValueError: Couldn't instantiate the backend tokenizer"


@dataclass(frozen=True)
class Expected:
    """One warning the analyzer must report, and the command that makes the intent explicit.

    `corrected` is the text after `python -m sglang.launch_server` (None: no flag edit can
    say it); `gone` is the text SGLang prints for the warning, absent once corrected.
    """

    rule: str
    flags: tuple[str, ...]
    corrected: str | None
    gone: str | None = None


@dataclass(frozen=True)
class IntentCase:
    name: str
    args: str
    note: str
    warnings: tuple[Expected, ...]
    root_class: str = "model_load"
    decisive: str = TOKENIZER
    wrapper: str | None = None  # read by generate_real_fixtures.launch_argv

    @property
    def command(self) -> str:
        return f"{real.LAUNCH} {self.args}"


def _max_running(args: str) -> Expected:
    """The 48-request cap every speculative launch without --max-running-requests gets."""
    return Expected(
        "spec-max-running-reset",
        ("--max-running-requests",),
        f"{args} --max-running-requests 48",
        "Max running requests is reset to",
    )


CASES: tuple[IntentCase, ...] = (
    IntentCase(
        "intent_draft_tokens_adjusted",
        f"{T} {E3} --speculative-num-steps 3 --speculative-eagle-topk 1 "
        "--speculative-num-draft-tokens 16",
        "topk 1 makes the draft a chain: speculative_hook._handle_eagle_family replaces the 16 "
        "draft tokens with steps + 1 = 4 and logs 'speculative_num_draft_tokens is adjusted ...'; "
        "max running requests is capped at 48 as well.",
        (
            _max_running(
                f"{T} {E3} --speculative-num-steps 3 --speculative-eagle-topk 1 "
                "--speculative-num-draft-tokens 16"
            ),
            Expected(
                "setting-adjusted",
                ("--speculative-num-draft-tokens",),
                f"{T} {E3} {SPEC_3_1_4}",
                "speculative_num_draft_tokens is adjusted",
            ),
        ),
    ),
    IntentCase(
        "intent_auto_spec_params",
        f"{T} {E3}",
        "No steps/topk/draft tokens: SGLang picks (5, 4, 8) for a LlamaForCausalLM target "
        "(_auto_choose_speculative_params) and logs nothing about it; server_args shows them.",
        (
            _max_running(f"{T} {E3}"),
            Expected(
                "spec-auto-params",
                (
                    "--speculative-num-steps",
                    "--speculative-eagle-topk",
                    "--speculative-num-draft-tokens",
                ),
                f"{T} {E3} --speculative-num-steps 5 --speculative-eagle-topk 4 "
                "--speculative-num-draft-tokens 8",
            ),
        ),
    ),
    IntentCase(
        "intent_deprecated_disable_cuda_graph",
        f"{T} --disable-cuda-graph",
        "DeprecatedStoreTrueAction prints the warning in bold yellow (\\x1b[1;33m) after the "
        "timestamp; the replacement is written in brace form, one flag per backend.",
        (
            Expected(
                "deprecated-flag",
                ("--disable-cuda-graph",),
                f"{T} --cuda-graph-backend-decode disabled --cuda-graph-backend-prefill disabled",
                "'--disable-cuda-graph' is deprecated",
            ),
        ),
    ),
    IntentCase(
        "intent_enable_dp_attention_without_dp_size",
        f"{T} --tp-size 2 --enable-dp-attention",
        "parallel_hook.handle_deprecated_dp_attention only moves --dp-size to --attn-dp-size; "
        "with no --dp-size, attention DP stays off (attn_dp_size 1 in server_args).",
        (
            Expected(
                "deprecated-flag",
                ("--enable-dp-attention",),
                f"{T} --tp-size 2 --attn-dp-size 2",
                "'--enable-dp-attention' is deprecated",
            ),
        ),
    ),
    IntentCase(
        "intent_enable_dp_attention_tp1",
        f"{T} --enable-dp-attention",
        "Single GPU: attention DP is impossible and the deprecated flag does nothing.",
        (
            Expected(
                "deprecated-flag",
                ("--enable-dp-attention",),
                T,
                "'--enable-dp-attention' is deprecated",
            ),
        ),
    ),
    IntentCase(
        "intent_dp_attention_chunked_prefill",
        f"{T} --tp-size 2 --dp-size 2 --enable-dp-attention --chunked-prefill-size 4096",
        "The old spelling of attention DP; parallel_hook._handle_data_parallelism then divides "
        "the chunked prefill size by the attention-DP size (4096 -> 2048).",
        (
            Expected(
                "deprecated-flag",
                ("--enable-dp-attention",),
                f"{T} --tp-size 2 --attn-dp-size 2 --chunked-prefill-size 4096",
                "'--enable-dp-attention' is deprecated",
            ),
            Expected(
                "dp-attention-chunked-prefill",
                ("--chunked-prefill-size", "--attn-dp-size"),
                f"{T} --tp-size 2 --dp-size 2 --enable-dp-attention --chunked-prefill-size 8192",
            ),
        ),
    ),
    IntentCase(
        "intent_draft_window_ngram",
        f"{T} --speculative-algorithm NGRAM --speculative-draft-window-size 1024",
        "handle_speculative_decoding: the draft window is honored only by EAGLE, EAGLE3 and "
        "DFLASH; _handle_ngram also fills 12 draft tokens and caps running requests.",
        (
            Expected(
                "flag-no-effect",
                ("--speculative-draft-window-size",),
                f"{T} --speculative-algorithm NGRAM",
                "--speculative-draft-window-size has no effect",
            ),
            _max_running(f"{T} --speculative-algorithm NGRAM --speculative-draft-window-size 1024"),
            Expected(
                "setting-adjusted",
                ("--speculative-num-draft-tokens",),
                f"{T} --speculative-algorithm NGRAM --speculative-draft-window-size 1024 "
                "--speculative-num-draft-tokens 12",
                "is set to 12 by default for ngram",
            ),
        ),
    ),
    IntentCase(
        "intent_deprecated_serving_flags",
        f"{T} --tool-call-parser qwen25 --disable-fast-image-processor "
        "--enable-flashinfer-allreduce-fusion --grpc-mode",
        "serving_hook._handle_deprecated_args: a deprecated tool-call parser name and three "
        "deprecated flags, each translated and logged once. --grpc-mode means the SMG gRPC "
        "server, whose package is not installed: that ImportError is the root cause.",
        (
            Expected(
                "deprecated-flag",
                ("--tool-call-parser",),
                f"{T} --tool-call-parser qwen --disable-fast-image-processor "
                "--enable-flashinfer-allreduce-fusion --grpc-mode",
                "The tool_call_parser 'qwen25' is deprecated",
            ),
            Expected(
                "deprecated-flag",
                ("--disable-fast-image-processor",),
                f"{T} --tool-call-parser qwen25 --enable-flashinfer-allreduce-fusion --grpc-mode "
                "--image-processor-backend pil",
                "--disable-fast-image-processor is deprecated",
            ),
            Expected(
                "deprecated-flag",
                ("--enable-flashinfer-allreduce-fusion",),
                f"{T} --tool-call-parser qwen25 --disable-fast-image-processor --grpc-mode "
                "--flashinfer-allreduce-fusion-backend auto",
                "--enable-flashinfer-allreduce-fusion is deprecated",
            ),
            Expected(
                "deprecated-flag",
                ("--grpc-mode",),
                f"{T} --tool-call-parser qwen25 --disable-fast-image-processor "
                "--enable-flashinfer-allreduce-fusion --smg-grpc-mode",
                "--grpc-mode is deprecated",
            ),
        ),
        root_class="environment",
        decisive="ImportError: gRPC mode requires",
    ),
    IntentCase(
        "intent_context_length_si_suffix",
        f"{T} --context-length 4k",
        "human_readable_int reads k as 1000: context_length 4000 in server_args, not 4096.",
        (Expected("si-suffix-value", ("--context-length",), f"{T} --context-length 4096"),),
    ),
    IntentCase(
        "intent_prefix_flags",
        f"{T} {E3} --speculative-num-steps 3 --speculative-eagle-topk 4 "
        "--speculative-num-draft-token 8 --max-running 48 --mem-frac 0.7",
        "Three unambiguous prefixes argparse (allow_abbrev) expands silently; the run works "
        "and the log never shows the typed spelling.",
        (
            Expected(
                "flag-prefix-expanded",
                (
                    "--speculative-num-draft-tokens",
                    "--max-running-requests",
                    "--mem-fraction-static",
                ),
                f"{T} {E3} --speculative-num-steps 3 --speculative-eagle-topk 4 "
                "--speculative-num-draft-tokens 8 --max-running-requests 48 "
                "--mem-fraction-static 0.7",
            ),
        ),
    ),
    IntentCase(
        "intent_dp_replicas",
        f"{T} --tp 2 --dp 2",
        "--dp is a prefix of --dp-size: two whole-model replicas of TP 2 (four GPUs), not "
        "attention DP; --tp is a prefix of --tp-size.",
        (
            Expected("flag-prefix-expanded", ("--tp-size",), f"{T} --tp-size 2 --dp 2"),
            Expected("dp-means-replicas", ("--dp-size",), f"{T} --tp 2 --dp-size 2"),
        ),
    ),
    IntentCase(
        "intent_mem_fraction_percent",
        f"{T} --mem-fraction-static 85",
        "A percentage where a fraction belongs: argparse's float and resolution both accept 85.",
        (
            Expected(
                "mem-fraction-above-one",
                ("--mem-fraction-static",),
                f"{T} --mem-fraction-static 0.85",
            ),
        ),
    ),
    IntentCase(
        "intent_lowercase_eagle3",
        f"{T} --speculative-algorithm eagle3 --speculative-draft-model-path "
        f"fixtures/models/eagle3-draft {SPEC_3_1_4} --max-running-requests 48",
        "handle_speculative_decoding upper-cases the algorithm; server_args says EAGLE3.",
        (
            Expected(
                "algorithm-respelled",
                ("--speculative-algorithm",),
                f"{T} {E3} {SPEC_3_1_4} --max-running-requests 48",
            ),
        ),
    ),
    IntentCase(
        "intent_eagle3_draft_as_eagle",
        f"{T} {real.EAGLE.replace('eagle-draft', 'eagle3-draft')} {SPEC_3_1_4} "
        "--max-running-requests 48",
        "An EAGLE-3 head (config.json: LlamaForCausalLMEagle3) served with EAGLE passes every "
        "check; on a GPU it would run with accept length near 1.00.",
        (
            Expected(
                "draft-algorithm-mismatch",
                ("--speculative-algorithm", "--speculative-draft-model-path"),
                f"{T} {E3} {SPEC_3_1_4} --max-running-requests 48",
            ),
        ),
    ),
)


def verify_quiet(args: str, gone: str | None) -> bool:
    """SGLang's parse + resolve + check pass for `args`, and `gone` is not printed."""
    try:
        proc = subprocess.run(
            [sys.executable, "-c", real.VERIFY_SNIPPET, *shlex.split(args)],
            cwd=ROOT,
            env=real.clean_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=real.VERIFY_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired:
        return False
    output = (proc.stdout + proc.stderr).decode(errors="replace")
    passed = proc.returncode == 0 and real.VERIFY_MARKER in output
    return passed and (gone is None or gone not in output)


def render_sidecar(
    case: IntentCase, result: real.RunResult, line: int | None, checks: list[bool]
) -> str:
    fixture: dict[str, object] = {
        "origin": "real",
        "sglang_version": real.SGLANG_VERSION,
        "command": case.command,
        "exit_code": result.exit_code,
        "generated_by": GENERATOR,
        "note": case.note,
    }
    if result.timed_out:
        fixture["timed_out"] = True
    expect: dict[str, object] = {"class": case.root_class}
    if line is not None:
        expect["line"] = line
    out = ["[fixture]", *_pairs(fixture), "", "[expect]", *_pairs(expect)]
    for warning, verified in zip(case.warnings, checks, strict=True):
        entry: dict[str, object] = {"rule": warning.rule, "flags": list(warning.flags)}
        if warning.corrected is not None:
            entry["corrected_command"] = f"{real.LAUNCH} {warning.corrected}"
            entry["verified"] = verified
        out += ["", "[[warnings]]", *_pairs(entry)]
    return "\n".join(out) + "\n"


def _pairs(table: dict[str, object]) -> list[str]:
    return [f"{key} = {real.toml_value(value)}" for key, value in table.items()]


def verifications(case: IntentCase) -> list[bool]:
    return [
        verify_quiet(w.corrected, w.gone) if w.corrected is not None else True
        for w in case.warnings
    ]


def generate(case: IntentCase) -> list[str]:
    result = real.run_case(case)  # type: ignore[arg-type]  # reads .args, .command, .wrapper
    real.write_if_changed(REAL / f"{case.name}.log", "\n".join(result.lines))
    line = real.decisive_line(result.lines, case.decisive)
    checks = verifications(case)
    real.write_if_changed(REAL / f"{case.name}.toml", render_sidecar(case, result, line, checks))
    problems = [f"{case.name}: no line starts with {case.decisive!r}"] if line is None else []
    problems += [
        f"{case.name}: corrected command for {w.rule} failed verification"
        for w, ok in zip(case.warnings, checks, strict=True)
        if not ok
    ]
    print(f"{case.name}: exit {result.exit_code}, line {line}, verified {checks}", flush=True)
    return problems


def check(case: IntentCase) -> list[str]:
    checks = verifications(case)
    bad = [w.rule for w, ok in zip(case.warnings, checks, strict=True) if not ok]
    print(f"{case.name}: {'ok' if not bad else 'PROBLEM ' + ', '.join(bad)}", flush=True)
    return [f"{case.name}: {rule} correction failed verification" for rule in bad]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="CASE", help="run only these cases")
    parser.add_argument("--check", action="store_true", help="only re-verify corrected commands")
    parser.add_argument("--jobs", type=int, default=2, help="launches run in parallel")
    args = parser.parse_args(argv)
    known = {case.name for case in CASES}
    unknown = sorted(set(args.only or ()) - known)
    if unknown:
        raise SystemExit(f"unknown case(s): {', '.join(unknown)}")
    cases = [c for c in CASES if not args.only or c.name in args.only]
    step = check if args.check else generate
    if not args.check:
        real.write_models()
    problems: list[str] = []
    with ThreadPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        for found in pool.map(step, cases):
            problems += found
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())

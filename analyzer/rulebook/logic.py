"""The Python logic a rule may name with `logic = "..."`.

Each function takes the raw Match and the ScannedLog it came from and returns
extra named groups (merged into the match, usable as `{placeholders}` in the
rule's text), or None to veto the match. Nothing here renders or fixes.
"""

from __future__ import annotations

import re
from collections.abc import Callable

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import Match, ScannedLog
from analyzer.rulebook.log_evidence import first_report, import_time
from analyzer.rulebook.refused_calls import dependency_call, own_call, sglang_call
from analyzer.sglang.dependency_names import guarded_import_packages
from analyzer.sglang.features import frame_flags, named_features
from analyzer.sglang.flag_history import shipped_history

SHAPE_PAIR = LazyPattern(
    r"\((?P<a_rows>\d+)x(?P<a_cols>\d+) and (?P<b_rows>\d+)x(?P<b_cols>\d+)\)"
)
TENSOR_SIZES = LazyPattern(
    r"tensor a \((?P<a>\d+)\) must match the size of tensor b \((?P<b>\d+)\)"
)
TORCH_SIZES = LazyPattern(
    r"torch\.Size\(\[(?P<a>[\d, ]+)\]\).*?torch\.Size\(\[(?P<b>[\d, ]+)\]\)"
)
DEST_NAME = LazyPattern(r"\b(speculative_[a-z_]+|[a-z]+(?:_[a-z0-9]+)+)\b")
OTHER_PROCESS = LazyPattern(r"Process \d+ has [\d.]+ [KMGT]i?B memory in use")

# Known speculative checks whose AssertionError carries no message. Keyed by a
# fragment of the failing source line (Python 3.11 prints only a statement's
# first line, so the frame's function is the fallback).
SPECULATIVE_CHECKS = (
    (
        ("speculative_eagle_topk is None", "speculative_num_draft_tokens is None", "assert ("),
        "speculative_eagle_topk speculative_num_draft_tokens speculative_num_steps",
        "SGLang only chooses the speculative settings automatically when none of "
        "--speculative-num-steps, --speculative-eagle-topk and --speculative-num-draft-tokens "
        "is given; once topk or draft tokens are set, --speculative-num-steps must be set too.",
    ),
)


def failing_check(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """Name the flags of a bare assertion from the source line it failed on."""
    traceback = match.traceback
    frame = traceback.last_frame if traceback else None
    code = frame.code if frame else ""
    groups = {"check": code or "(source line not printed)"}
    for fragments, dests, meaning in SPECULATIVE_CHECKS:
        if any(f in code for f in fragments) and _in_speculative_code(match):
            return {**groups, "check_flags": dests, "check_meaning": meaning}
    dests = " ".join(sorted(set(DEST_NAME.findall(code))))
    meaning = "SGLang's speculative-decoding argument check failed"
    return {**groups, "check_flags": dests, "check_meaning": meaning}


def _in_speculative_code(match: Match) -> bool:
    traceback = match.traceback
    if traceback is None:
        return False
    return any("specul" in f.file or "specul" in f.function for f in traceback.frames)


def hidden_dims(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """Read the two mismatching dimensions; note when one is 3x the other (EAGLE vs EAGLE3)."""
    text = match.line.body
    dims = _dims(text)
    if dims is None:
        return {"diagnosis": "the draft model and the target disagree on a tensor shape"}
    got, expected = dims
    small, large = sorted((got, expected))
    if small and large == 3 * small:
        return {
            "got": str(got),
            "expected": str(expected),
            "ratio": "3",
            "diagnosis": (
                f"{large} = 3 x {small}: the draft expects the concatenated hidden states of 3 "
                "target layers (EAGLE-3) but received a single layer's (EAGLE), or the reverse"
            ),
        }
    return {
        "got": str(got),
        "expected": str(expected),
        "diagnosis": f"the draft and the target disagree on a dimension ({got} vs {expected})",
    }


def _dims(text: str) -> tuple[int, int] | None:
    pair = SHAPE_PAIR.search(text)
    if pair:
        return int(pair["a_cols"]), int(pair["b_rows"])
    sizes = TENSOR_SIZES.search(text)
    if sizes:
        return int(sizes["a"]), int(sizes["b"])
    torch_sizes = TORCH_SIZES.search(text)
    if torch_sizes:
        a = [int(x) for x in torch_sizes["a"].split(",") if x.strip()]
        b = [int(x) for x in torch_sizes["b"].split(",") if x.strip()]
        for x, y in zip(a, b, strict=False):
            if x != y:
                return x, y
    return None


def memory_phase(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """Which startup phase ran out of memory, and whether other processes hold memory."""
    phase = _phase_at(match, log)
    text = " ".join(line.body for line in match.evidence) + " " + match.line.body
    if match.traceback is not None:
        text += " " + " ".join(f.function for f in match.traceback.frames)
        phase = _phase_from_frames(match) or phase
    # the KV pool's own sizing refused: 0.1.x spelled it "Not enought", 0.5.19+ words the
    # budget check "Loaded weights leave no GPU memory for the KV cache"
    if any(m in text for m in ("Not enough memory", "Not enought memory", "no GPU memory for the KV cache")):
        phase = "kv_cache"
    if KV_POOL_FULL.search(match.line.body):
        phase = "kv_pool"
    # PyTorch names other processes "Process N has ..."; in a container the server itself
    # can appear that way, so it only counts when "this process has" is reported too.
    others = bool(OTHER_PROCESS.search(text)) and "this process has" in text
    advice_phase = "" if others else phase
    # features whose code ran out of memory (--page-size's allocator, --cpu-offload-gb's
    # pinned copy: analyzer/catalogs/features.toml)
    features = frame_flags(match.traceback)
    caps = _prefill_caps(log) if phase == "serving" and not others and _in_prefill(match) else []
    return {
        "phase": phase,
        "phase_text": PHASE_TEXT[phase],
        "advice_phase": advice_phase,
        "other_processes": "yes" * others,
        "extra_flags": " ".join(features),
        "prefill_caps": " or ".join(caps),
        # the flags linked: the features whose code ran out, the prefill batch's caps when a
        # prefill ran out, then the phase's own setting
        "memory_flags": " ".join([*features, *caps, _phase_setting(phase, others)]),
    }


# the forward of a prefill batch: model_runner.forward_extend (0.2-0.5.13),
# runner/eager_runner.py _execute_extend(_cp, _cp_v2) (0.5.19+), tp_worker.forward_prefill_batch
# (0.2), router/model_rpc.forward_fill_batch (0.1)
PREFILL_FORWARDS = (
    "forward_extend", "_execute_extend", "_execute_extend_cp", "_execute_extend_cp_v2",
    "forward_prefill_batch", "forward_fill_batch",
)  # fmt: skip


def _in_prefill(match: Match) -> bool:
    """The allocation that failed was a prefill batch's forward (not a speculative verify,
    which runs as an extend too)."""
    frames = match.traceback.frames if match.traceback is not None else ()
    paths = [f.file.replace("\\", "/") for f in frames]
    return any(f.function in PREFILL_FORWARDS for f in frames) and not any(
        "/speculative/" in path for path in paths
    )


def _prefill_caps(log: ScannedLog) -> list[str]:
    """The settings that cap a prefill batch's tokens, so its activation memory: the
    scheduler's PrefillAdder takes new tokens up to --max-prefill-tokens, and per chunk up to
    --chunked-prefill-size when chunked prefill is on (0.2 has no chunking). The record
    tells which is in force; without it, both."""
    record = log.server_args
    if record is None:
        return ["--chunked-prefill-size", "--max-prefill-tokens"]
    chunked = record.get("chunked_prefill_size")
    if isinstance(chunked, int) and chunked > 0:
        return ["--chunked-prefill-size"]
    return ["--max-prefill-tokens"]


def _phase_setting(phase: str, others: bool) -> str:
    """The setting that decided the memory the phase needed: for the weights, how many GPUs
    share them (--tp-size; --mem-fraction-static only sizes the pool after them); for the
    rest, the static pool's share (also when other processes hold the memory: the one
    setting in play)."""
    return "--tp-size" if phase == "weight_loading" and not others else "--mem-fraction-static"


# schedule_batch / mem_cache: "Prefill out of memory. Try to lower your batch size." (and Decode)
KV_POOL_FULL = LazyPattern(r"(?:(?:Prefill|Decode) out|Out) of memory\. Try to lower your batch size")


PHASE_TEXT = {
    "weight_loading": "while loading the model weights",
    "kv_cache": "while sizing the KV cache (memory pool)",
    "cuda_graph_capture": "during CUDA graph capture",
    "serving": "while serving requests",
    "kv_pool": "while serving: the KV cache pool had no free slots for a batch",
    "startup": "during startup",
}


def _phase_at(match: Match, log: ScannedLog) -> str:
    phase = "startup"
    for number, name in log.phases:
        if number > match.line.number:
            break
        phase = {
            "distributed_init": "startup",
            "distributed_ready": "startup",
            "weight_loading": "weight_loading",
            "weights_loaded": "kv_cache",
            "kv_cache_allocated": "kv_cache",
            "cuda_graph_capture": "cuda_graph_capture",
            "cuda_graph_captured": "serving",
            "http_warmup": "serving",
            "serving": "serving",
        }[name]
    return phase


def _phase_from_frames(match: Match) -> str | None:
    functions = " ".join(f"{f.file} {f.function}" for f in match.traceback.frames)  # type: ignore[union-attr]
    if "capture" in functions and "graph" in functions:
        return "cuda_graph_capture"
    if "load_weights" in functions or "load_model" in functions:
        return "weight_loading"
    if "init_memory_pool" in functions or "kv_cache" in functions:
        return "kv_cache"
    return None


def unrecognized_flags(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """Split argparse's leftovers into flags and the values that followed them."""
    tokens = match.groups.get("args", "").split()
    flags = [t.split("=", 1)[0] for t in tokens if t.startswith("-") and not _is_number(t)]
    if not flags:  # only stray words (`--switch true`: the switch took no value)
        return {"flag_list": "the stray word(s) " + ", ".join(repr(t) for t in tokens)}
    # what was typed, then the option each spelling names in SGLang's releases, if any
    meant = [m for flag in flags for m in shipped_history().meant(flag)]
    return {"flag_list": ", ".join(flags), "flag_names": " ".join([match.groups["args"], *meant])}


def _is_number(token: str) -> bool:
    try:
        float(token)
    except ValueError:
        return False
    return True


FLAG_MENTION = LazyPattern(r"--[a-z][\w-]+|\b[a-z]+(?:_[a-z0-9]+)+\b")


def two_flags(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """Only an incompatibility when the message names at least two flags (as flags, as
    ServerArgs fields, or as the features SGLang's messages name: `HybridAttentionBackend
    does not support speculative decoding`)."""
    message = match.groups.get("message", "")
    mentioned = {"--" + m.lstrip("-").replace("_", "-") for m in FLAG_MENTION.findall(message)}
    for feature in named_features(message):  # a feature of several flags counts once
        if not mentioned & set(feature.flags):
            mentioned.add(feature.flags[0])
    # `The arguments enable-hierarchical-cache and disable-radix-cache are mutually exclusive`
    named = set(ARGUMENT_NAMES.findall(message))
    if len(mentioned) >= 2:
        return {}
    if len(named) >= 2:
        return {"message": ARGUMENT_NAMES.sub(r"--\1", message)}
    return None


# flag names written without their dashes, after "argument(s)": argparse's dest spelling
ARGUMENT_NAMES = LazyPattern(r"(?<=\barguments? (?:[\w-]+ (?:and|or|, ) ?)*)\b([a-z0-9]+(?:-[a-z0-9]+)+)\b")


PROXY_SIGNS = LazyPattern(r"502 Bad Gateway|\b[Pp]roxy\b|squid|ProxyError")


def proxy_hint(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """Point at an HTTP proxy when the warmup failure or the lines around it show one."""
    lines = log.context.get(match.line.number, [match.line])
    for line in lines:
        sign = PROXY_SIGNS.search(line.body)
        if sign:
            return {"proxy_evidence": sign.group(0)}
    return {"proxy_evidence": ""}


# addresses a server binds to that name no host to connect to (server_args.url() puts
# --host in the warmup URL as given: `http://:30000`, `http://0.0.0.0:30000`)
UNROUTED_HOSTS = frozenset({"", "0.0.0.0", "[::]", "::"})


def warmup_hint(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """`proxy_hint`, and --host when the warmup URL holds a host no one can connect to or
    a proxy will not bypass."""
    found = proxy_hint(match, log) or {}
    host = match.groups.get("host")
    if host is None:  # `Initialization failed. warmup error: Traceback ...`: its traceback's
        host = _warmup_host(match, log)
    found["host_flag"] = "--host" if host is not None and host in UNROUTED_HOSTS else ""
    return found


# the warmup's request URL (http_server.py _execute_server_warmup: server_args.url() +
# "/model_info", older "/get_model_info") as requests and urllib3 quote it in their errors
WARMUP_URL = LazyPattern(r"https?://(?P<host>[^/\s:'\"]*|\[[^\]]*\]):\d+/(?:get_)?model_info\b")


def _warmup_host(match: Match, log: ScannedLog) -> str | None:
    """The host of the warmup URL in the exception of the traceback the match's line opens."""
    line = match.line
    for traceback in log.tracebacks:
        if (traceback.first.source, traceback.first.number) == (line.source, line.number):
            found = WARMUP_URL.search(traceback.exception_message)
            return found["host"] if found else None
    return None


def model_load_flags(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """Link --trust-remote-code when the loader says the model needs its own code."""
    detail = match.groups.get("detail", "")
    # transformers writes `trust_remote_code=True` on a later line of "contains custom code"
    needs = any(
        word in detail for word in ("trust_remote_code", "trust-remote-code", "custom code which")
    )
    return {"needs_remote_code": "yes" * needs, "extra_flags": "--trust-remote-code" * needs}


STALL_TEXT = {
    "distributed_init": "in distributed init (`Init torch distributed begin` with no `ends`)",
    "distributed_ready": "after distributed init, before weight loading began",
    "weight_loading": "while loading the model weights",
    "weights_loaded": "after the weights loaded, while sizing the KV cache",
    "kv_cache_allocated": "after the KV cache was allocated, before CUDA graph capture",
    "cuda_graph_capture": "during CUDA graph capture",
    "cuda_graph_captured": "after CUDA graph capture, before the server said it was ready",
    "http_warmup": "in the warmup request, after the HTTP server started",
}
PHASE_ORDER = tuple(STALL_TEXT)
# Phases a rank enters and must leave (a `begin` with no `end` yet): a log that stops in one
# shows where it waits. The others are boundaries: a step ended there. A rank that printed
# more after its boundary line had started the next step; one whose last line is the end
# of a step (every rank alike) was waiting for nothing: a paste cut there, or a server
# still going, no evidence of a stall.
OPEN_PHASES = ("distributed_init", "weight_loading", "cuda_graph_capture", "http_warmup")


def stalled_phase(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """The startup phase each rank last reached, for a log that stops without an error.

    A stall needs evidence: a rank inside an open phase, or ranks that stopped at different
    points. Ranks that stopped earlier than the others are named: they are where to look.
    """
    reached = {rank: phase for rank, (phase, _) in log.last_phase.items() if phase in STALL_TEXT}
    if "http_warmup" in reached.values() and not any(
        name not in ("http_warmup", "serving") for _, name in log.phases
    ):
        return None  # uvicorn alone is any web app (a router, a client's mock server)
    if not reached:
        return {"phase": "startup", "phase_text": "early in startup", "behind": ""} | _last_error(log)
    inside = [phase for rank, phase in reached.items() if _waiting(rank, phase, log)]
    if not inside and len(set(reached.values())) == 1:
        return None
    stalled = min(inside or reached.values(), key=PHASE_ORDER.index)
    behind = sorted(r for r, phase in reached.items() if phase == stalled and r)
    ahead = sorted(
        r
        for r, phase in reached.items()
        if PHASE_ORDER.index(phase) > PHASE_ORDER.index(stalled) and r
    )
    note = ""
    if behind and ahead:
        note = (
            f" Not every rank got as far: {', '.join(behind)} stopped "
            f"{STALL_TEXT[stalled]} while {', '.join(ahead)} got further."
        )
    found = {"phase": stalled, "phase_text": STALL_TEXT[stalled], "behind": note}
    return found | _last_error(log)


# a line that reports an error without a traceback after it: SGLang's wrapper cut before
# its traceback, an exception's name, an error-level word
ERROR_WORDS = LazyPattern(r"hit an exception|\w(?:Error|Exception)\b|\berrors?\b|\bfailed\b")


def _last_error(log: ScannedLog) -> dict[str, str]:
    """How the stall's log ended: with no error, or with an error line no traceback follows
    (the explanation must not call a log that quotes one error-free)."""
    error = next((ln for ln in reversed(log.tail) if ERROR_WORDS.search(ln.body)), None)
    if error is None:
        return {"how_ended": "with no error", "error_line": ""}
    text = error.body.strip()
    return {
        "how_ended": f"after an error line with no traceback (line {error.number}: `{text}`)",
        "error_line": str(error.number),
    }


def _waiting(rank: str, phase: str, log: ScannedLog) -> bool:
    """The rank was inside a step when the log stopped: an open phase, or lines of its own
    after the boundary it last reached."""
    if phase in OPEN_PHASES:
        return True
    boundary = log.last_phase[rank][1].number
    return any(ln.number > boundary and (ln.rank_label or "") == rank for ln in log.tail)


def pipeline_stages(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """A hang under pipeline parallelism: the rank labels name the stages (scheduler's
    logger prefix holds ` PP{pp_rank}` only when pp_size > 1), and each stage waits on the
    previous one's activations every step, so one stalled stage hangs all after it."""
    lines = (match.line, *log.tail)
    if not any(kind == "PP" for line in lines for kind, _ in line.ranks):
        return {"extra_flags": "", "stages": ""}
    return {
        "extra_flags": "--pp-size",
        "stages": " The ranks are pipeline stages (PPn): a stage that stalls or dies leaves "
        "every later stage waiting for its activations until the watchdog fires.",
    }


# scheduler.py / detokenizer_manager.py / tokenizer_manager.py log f"{Name} hit an exception: {traceback}"
WRAPPER = LazyPattern(r"\b(?P<process>\w+) hit an exception: ")
HTTP_FRAMEWORKS = ("/uvicorn/", "/starlette/", "/fastapi/")


def raising_frame(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """Name the SGLang frame that raised and the process that logged it. An exception that
    went through the HTTP framework belongs to one request (uvicorn logs it and keeps
    serving), so it is not a crash of the server."""
    traceback = match.traceback
    if traceback is None:
        return None
    paths = [(f.file.replace("\\", "/"), f) for f in traceback.frames]
    if any(framework in path for path, _ in paths for framework in HTTP_FRAMEWORKS):
        return None
    own = [(path, f) for path, f in paths if "/sglang/" in path]
    if not own:
        return None
    path, frame = own[-1]
    wrapper = WRAPPER.search(traceback.first.body)
    return {
        "where": f"{frame.function} ({path[path.rfind('sglang/'):]}:{frame.lineno})",
        "process": wrapper["process"] if wrapper else "",
    }


def skipped_import(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """A NameError in SGLang's frames; pasted without frames, only for a name SGLang binds
    only by a guarded import from a dependency (any other name could be any program's)."""
    if match.traceback is not None and match.traceback.frames:
        return {}
    packages = guarded_import_packages(match.groups.get("name", ""))
    return {"package": " or ".join(packages)} if packages else None


# models/registry.py import_model_classes (0.2-0.4 wrote ". " before the error)
SKIPPED_IMPORT = LazyPattern(
    r"Ignore import error when loading (?P<module>sglang\.srt\.models\.(?P<name>\w+))[.:] "
    r"(?P<error>.*)"
)
ARCH_NAME = LazyPattern(r"[A-Za-z_]\w*")


def masked_import(match: Match, log: ScannedLog) -> dict[str, str] | None:
    """An architecture SGLang calls unsupported whose module failed to import earlier: the
    skipped module is the one whose name starts the architecture's (`deepseek_v2` for
    `DeepseekV3ForCausalLM`, letters only: the file names do not carry the version)."""
    groups = match.groups
    names = ARCH_NAME.findall(" ".join(groups.get(g, "") for g in ("archs", "arch", "module_arch")))
    best: tuple[int, str, re.Match[str]] | None = None
    for line in log.skipped_imports:
        skipped = SKIPPED_IMPORT.search(line.body)
        if skipped is None or line.number > match.line.number:
            continue
        stem = _module_stem(skipped["name"])
        arch = next((a for a in names if len(stem) >= 3 and _letters(a).startswith(stem)), None)
        if arch is not None and (best is None or len(stem) > best[0]):
            best = (len(stem), arch, skipped)
    if best is None:
        return None
    _, arch, skipped = best
    return {
        "arch_name": arch,
        "module": skipped["module"],
        "import_error": skipped["error"].strip(),
    }


# models/ files that split one family by kind: gemma3_mm.py (Gemma3ForConditionalGeneration),
# gemma3n_causal.py (Gemma3nForCausalLM); the kind is not part of the architecture's name
MODULE_KIND_SUFFIXES = ("_mm", "_causal")


def _module_stem(name: str) -> str:
    """The letters a module's architectures start with (the longest stem wins among modules)."""
    for suffix in MODULE_KIND_SUFFIXES:
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    return _letters(name)


def _letters(name: str) -> str:
    return "".join(ch for ch in name.lower() if "a" <= ch <= "z")


LOGIC: dict[str, Callable[[Match, ScannedLog], dict[str, str] | None]] = {
    "stalled_phase": stalled_phase,
    "pipeline_stages": pipeline_stages,
    "failing_check": failing_check,
    "model_load_flags": model_load_flags,
    "proxy_hint": proxy_hint,
    "warmup_hint": warmup_hint,
    "raising_frame": raising_frame,
    "sglang_call": sglang_call,
    "dependency_call": dependency_call,
    "own_call": own_call,
    "masked_import": masked_import,
    "skipped_import": skipped_import,
    "two_flags": two_flags,
    "hidden_dims": hidden_dims,
    "memory_phase": memory_phase,
    "unrecognized_flags": unrecognized_flags,
    "first_report": first_report,
    "import_time": import_time,
}

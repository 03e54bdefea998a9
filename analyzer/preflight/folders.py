"""Checks from the model folders a command names (--model-path, --speculative-draft-model-path,
--tokenizer-path), reading config.json and model.safetensors.index.json only, never weights.

Each problem carries the lines SGLang would print when it hits the same fault (the
post-mortem classes them and proposes the fix) or, where the crash has no message of its
own, its class, flags and fix directly. What an architecture is (an EAGLE / EAGLE-3 / MTP
draft, which head counts its attention asserts divide by the TP size, which names its
load_weights maps to the draft's decoder layer) comes from the release's model registry
(analyzer/sglang/model_registry.py, mined from srt/models/).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analyzer.core.model import Edit
from analyzer.preflight.commands import traceback_text
from analyzer.preflight.report import Problem
from analyzer.repair.predict import derived_context_length
from analyzer.sglang.error_catalog import ErrorCatalog
from analyzer.sglang.launch_command import MODEL_PATH_FLAGS
from analyzer.sglang.model_registry import ModelRegistry

MODEL, DRAFT, TOKENIZER = MODEL_PATH_FLAGS
INDEX = "model.safetensors.index.json"
MAX_JSON_BYTES = 64 * 2**20  # an index of a very large model is a few MiB
ALLOW_LONGER_CONTEXT = "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN"
TRUE_ENV = ("1", "true", "yes", "on")
EAGLE_DRAFTS = ("EAGLE", "EAGLE3")
# the hidden states the target hands an EAGLE-3 draft: three layers unless its config says
DEFAULT_AUX_LAYERS = 3
DRAFT_TOKENS = 7  # the row count shown in a synthetic shape error


@dataclass
class Folders:
    """What the command says about its model folders, resolved against `cwd`."""

    values: Mapping[str, str]
    cwd: Path
    env: Mapping[str, str]
    registry: ModelRegistry | None
    errors: ErrorCatalog | None = None

    def path(self, flag: str) -> Path | None:
        value = self.values.get(flag)
        if not value:
            return None
        path = Path(value).expanduser()
        return path if path.is_absolute() else self.cwd / path

    def config(self, flag: str) -> dict[str, Any] | None:
        path = self.path(flag)
        return _json(path / "config.json") if path is not None else None


def folder_problems(folders: Folders) -> list[Problem]:
    """Paths, configs and shards first; then what the configs say against the flags."""
    problems = []
    for flag in MODEL_PATH_FLAGS:
        problems.extend(_path_problems(folders, flag))
    if any(p.blocking for p in problems):
        return problems
    problems.extend(_context(folders))
    problems.extend(_tp_heads(folders))
    problems.extend(_draft(folders))
    return problems


# ---- paths, config.json, shards ----------------------------------------------------------


def _path_problems(folders: Folders, flag: str) -> list[Problem]:
    value = folders.values.get(flag)
    path = folders.path(flag)
    if value is None or path is None:
        return []
    if not path.exists():
        if not looks_local(value):
            return []  # a hub id: the hub answers, not the folder
        line = (
            "OSError: Repo id must be in the form 'repo_name' or 'namespace/repo_name': "
            f"'{value}'. Use `repo_type` argument if needed."
        )
        message = f"{flag} {value}: no such file or folder (SGLang takes it for a hub id)"
        return [_crash("paths", "model_load", [flag], message, line)]
    if not path.is_dir() or flag == TOKENIZER:
        return []
    if not (path / "config.json").is_file():
        line = (
            f"OSError: {value} does not appear to have a file named config.json. Checkout "
            f"'https://huggingface.co/{value}/tree/None' for available files."
        )
        message = f"{flag} {value}: the folder has no config.json"
        return [_crash("paths", "model_load", [flag], message, line)]
    if folders.values.get("--load-format") == "dummy":
        return []
    index = _json(path / INDEX)
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not isinstance(weight_map, dict):
        return []
    missing = sorted({str(f) for f in weight_map.values() if not (path / str(f)).is_file()})
    if not missing:
        return []
    # 0.5.2x model_loader/weight_utils.py filter_duplicate_safetensors_files fails fast;
    # older releases load without the missing tensors
    folder = value.rstrip("/")
    names = [Path(m).name for m in missing]
    line = (
        f"RuntimeError: {folder}/{INDEX} references {len(missing)} shard file(s) missing from "
        f"{folder} (incomplete download?): {names}"
    )
    frames = [
        (
            "srt/model_loader/weight_utils.py",
            "filter_duplicate_safetensors_files",
            "raise RuntimeError(",
        )
    ]
    shown = ", ".join(missing[:3]) + (f" and {len(missing) - 3} more" if len(missing) > 3 else "")
    message = f"{flag} {value}: {INDEX} names shard files that are not there: {shown}"
    return [_crash("paths", "model_load", [flag], message, line, frames)]


def looks_local(value: str) -> bool:
    """A path, not a Hugging Face id: absolute, ./ ../ ~, or more than one `/`."""
    return value.startswith(("/", "./", "../", "~")) or value.count("/") > 1


# ---- the model's own limits --------------------------------------------------------------


def _context(folders: Folders) -> list[Problem]:
    """configs/model_config.py _derive_context_length refuses a longer --context-length."""
    given = folders.values.get("--context-length")
    path = folders.path(MODEL)
    if given is None or path is None or not given.isdigit():
        return []
    if folders.env.get(ALLOW_LONGER_CONTEXT, "").lower() in TRUE_ENV:
        return []
    derived = derived_context_length(path)
    if derived is None or int(given) <= derived:
        return []
    line = (
        f"ValueError: Warning: User-specified context_length ({given}) is greater than the "
        f"derived context_length ({derived}). This may lead to incorrect model outputs or CUDA "
        f"errors. Note that the derived context_length may differ from max_position_embeddings "
        f"in the model's config. To allow overriding this maximum, set the env var "
        f"{ALLOW_LONGER_CONTEXT}=1"
    )
    # launch_server resolves the arguments, which builds the ModelConfig
    frames: list[tuple[Any, ...]] = [
        ("launch_server.py", "run_server", "server_args.resolve_once()"),
        ("srt/server_args.py", "resolve_once", "run_resolution_pipeline(self)"),
        ("srt/configs/model_config.py", "__init__", "self._derive_context_length(context_length)"),
    ]
    sites = (
        folders.errors.match("ValueError", line[len("ValueError: ") :]) if folders.errors else []
    )
    if sites:
        site = sites[0]
        frames.append((site.file, site.function.rsplit(".", 1)[-1], "raise ValueError(", site.line))
    message = (
        f"--context-length {given} is above the {derived} tokens the model's config.json "
        f"allows; SGLang refuses it unless {ALLOW_LONGER_CONTEXT}=1"
    )
    return [_crash("model", "config_validation", ["--context-length"], message, line, frames)]


def _tp_heads(folders: Folders) -> list[Problem]:
    """Heads and KV heads the model's attention asserts divide by the attention-TP size."""
    tp = _int(folders.values.get("--tp-size")) or 1
    size = tp // _attention_dp(folders.values)
    if size <= 1:
        return []
    problems = []
    for flag in (MODEL, DRAFT):
        config = _text_config(folders.config(flag))
        architecture = _architecture(config)
        entry = folders.registry.get(architecture) if folders.registry and architecture else None
        if entry is None or not entry.asserts or config is None:
            continue
        heads = _int(config.get("num_attention_heads"))
        kv = _int(config.get("num_key_value_heads")) or heads
        failed = None
        if "heads" in entry.asserts and heads and heads % size:
            failed = ("total_num_heads % tp_size == 0", f"{heads} attention heads")
        elif "kv_heads" in entry.asserts and kv and (kv % size if kv >= size else size % kv):
            check = "total_num_kv_heads % tp_size" if kv >= size else "tp_size % total_num_kv_heads"
            failed = (f"{check} == 0", f"{kv} KV heads")
        if failed is None:
            continue
        code, what = failed
        # in the words of distributed/utils.py ensure_divisibility, the TP split's own check
        line = f"AssertionError: {what.split()[0]} is not divisible by {size}"
        frames = [
            (entry.module, "__init__", f"assert self.{code}"),
            (
                "srt/distributed/utils.py",
                "ensure_divisibility",
                "assert numerator % denominator == 0",
            ),
        ]
        split = f"--tp-size {tp}" + (
            f" over {tp // size} attention-DP groups" if size != tp else ""
        )
        message = (
            f"{folders.values[flag]} ({architecture}) has {what}, which {split} cannot split "
            f"evenly: {entry.module} asserts {code} while building the model"
        )
        problems.append(_crash("model", "runtime_crash", ["--tp-size"], message, line, frames))
    return problems


def _attention_dp(values: Mapping[str, str]) -> int:
    explicit = _int(values.get("--attn-dp-size"))
    if explicit:
        return explicit
    if "--enable-dp-attention" in values:
        return _int(values.get("--dp-size")) or 1
    return 1


# ---- the draft ---------------------------------------------------------------------------


def _draft(folders: Folders) -> list[Problem]:
    algorithm = (folders.values.get("--speculative-algorithm") or "").upper()
    draft = _text_config(folders.config(DRAFT))
    target = _text_config(folders.config(MODEL))
    architecture = _architecture(draft)
    entry = folders.registry.get(architecture) if folders.registry and architecture else None
    if algorithm not in EAGLE_DRAFTS or draft is None or entry is None:
        return []
    path = folders.values[DRAFT]
    problems = []
    if entry.draft in EAGLE_DRAFTS and entry.draft != algorithm:
        problems.append(
            _family_mismatch(path, architecture or "", entry.draft, algorithm, entry.module)
        )
    elif entry.draft == algorithm and target is not None:
        problems.extend(_width(path, architecture or "", draft, target, algorithm, entry.module))
    problems.extend(_layer_names(folders, path, architecture or "", entry.layer_names))
    return problems


def _family_mismatch(
    path: str, architecture: str, family: str, algorithm: str, module: str
) -> Problem:
    kind = "an EAGLE-3" if family == "EAGLE3" else "an EAGLE"
    why = (
        "the target would hand it one layer's hidden states instead of the three it is trained "
        "on: its draft tokens are rejected (accept length near 1.00) or, where the widths "
        "differ, the shapes fail at CUDA graph capture"
        if family == "EAGLE3"
        else "the target would hand it three layers' hidden states where it takes one: the "
        "shapes fail at CUDA graph capture"
    )
    message = (
        f"{path} is {architecture}, {kind} draft in SGLang's model registry ({module}), but "
        f"--speculative-algorithm is {algorithm}: {why}"
    )
    return Problem(
        "speculative",
        "hidden_dim_mismatch",
        ["--speculative-algorithm", "--speculative-draft-model-path"],
        message,
        True,
        title=f"{kind[3:]} draft is served with --speculative-algorithm {algorithm}",
        edits=[Edit("set", "--speculative-algorithm", value=family)],
    )


def _width(
    path: str,
    architecture: str,
    draft: dict[str, Any],
    target: dict[str, Any],
    algorithm: str,
    module: str,
) -> list[Problem]:
    """The draft's input width against the hidden states the target hands it."""
    hidden = _int(target.get("hidden_size"))
    own = _int(draft.get("hidden_size"))
    width = _int(draft.get("target_hidden_size")) or own
    if not hidden or not width or not own or width == hidden:
        return []
    if algorithm == "EAGLE3":
        aux = _aux_layers(draft)
        shapes = f"({DRAFT_TOKENS}x{hidden * aux} and {width * aux}x{own})"
        code = "hidden_states = self.fc(hidden_states)"
        takes = f"{aux} x {width} (target_hidden_size or hidden_size, times {aux} aux layers)"
    else:
        shapes = f"({DRAFT_TOKENS}x{own + hidden} and {own * 2}x{own})"
        code = "hidden_states = self.fc(torch.cat((hidden_states, spec_hidden), dim=-1))"
        takes = f"hidden states {width} wide"
    line = f"RuntimeError: mat1 and mat2 shapes cannot be multiplied {shapes}"
    message = (
        f"{path} ({architecture}) was trained for a target whose hidden size is {width}; "
        f"--model-path's is {hidden}: the draft takes {takes}, so its first layer fails on the "
        "target's hidden states"
    )
    frames = [(module, "forward", code)]
    flags = ["--speculative-draft-model-path"]
    return [_crash("speculative", "hidden_dim_mismatch", flags, message, line, frames)]


def _aux_layers(draft: dict[str, Any]) -> int:
    """llama_eagle3.py LlamaModel.__init__: num_aux_hidden_states, else the eagle_config's
    layer ids, else 3."""
    explicit = _int(draft.get("num_aux_hidden_states"))
    if explicit:
        return explicit
    eagle = draft.get("eagle_config")
    ids = eagle.get("eagle_aux_hidden_state_layer_ids") if isinstance(eagle, dict) else None
    return len(ids) if isinstance(ids, list) and ids else DEFAULT_AUX_LAYERS


def _layer_names(
    folders: Folders, path: str, architecture: str, accepted: tuple[str, ...]
) -> list[Problem]:
    """The decoder layer's name in the draft's weight index against what load_weights maps."""
    folder = folders.path(DRAFT)
    index = _json(folder / INDEX) if folder is not None else None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if not accepted or not isinstance(weight_map, dict) or folders.registry is None:
        return []
    known = folders.registry.layer_names()
    names = sorted({_first(k) for k in weight_map if _first(k) in known} - set(accepted))
    if not names:
        return []
    version = folders.registry.version
    message = (
        f"{path} names the draft's decoder layer `{names[0]}.*`; sglang {version}'s "
        f"{architecture}.load_weights maps only {', '.join(f'`{n}.*`' for n in accepted)}: "
        "those tensors would be skipped and the draft would run on uninitialised weights"
    )
    return [
        Problem(
            "weights",
            "weight_key_mismatch",
            ["--speculative-draft-model-path"],
            message,
            True,
            title="Checkpoint weight names do not match the model",
        )
    ]


def _first(key: str) -> str:
    parts = key.split(".")
    return parts[1] if parts[0] == "model" and len(parts) > 1 else parts[0]


# ---- shared ------------------------------------------------------------------------------


def _crash(
    check: str,
    rule_class: str,
    flags: list[str],
    message: str,
    exception_line: str,
    frames: list[tuple[Any, ...]] | None = None,
) -> Problem:
    """A problem with the traceback SGLang would print (frames: file, function, code)."""
    log = traceback_text(frames, exception_line) if frames else exception_line + "\n"
    return Problem(check, rule_class, flags, message, True, log=log)


def _json(path: Path) -> dict[str, Any] | None:
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            return None
        data = json.loads(path.read_text("utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _text_config(config: dict[str, Any] | None) -> dict[str, Any] | None:
    """A multimodal config's language model part carries the sizes."""
    if config is None:
        return None
    text = config.get("text_config")
    if isinstance(text, dict):
        return {**text, "architectures": config.get("architectures")}
    return config


def _architecture(config: dict[str, Any] | None) -> str | None:
    names = config.get("architectures") if config else None
    if isinstance(names, list) and names and isinstance(names[0], str):
        return names[0]
    return None


def _int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    try:
        return int(str(value)) if value is not None else None
    except ValueError:
        return None

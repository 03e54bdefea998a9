"""Mine a release's model registry (srt/models/*.py) for what the pre-flight reads from a
model folder's config.json and weight index (JSON, `catalogs/models-VERSION.json`).

SGLang's registry (srt/models/registry.py) serves the class a config.json's `architectures`
names from each module's `EntryClass`. Per architecture this records:

- `draft`: which speculative family it is a draft of, from the class name as SGLang spells
  it (`...Eagle3` EAGLE3, `...Eagle` EAGLE, `...NextN` / `...MTP` MTP), else null;
- `asserts`: the head counts the module's attention asserts divide by the TP size
  (`assert self.total_num_heads % tp_size == 0` as in llama.py LlamaAttention.__init__),
  followed into the sglang.srt.models modules it imports;
- `layer_names` (drafts): the names its load_weights accepts for the draft's decoder layer:
  the attributes holding a `...DecoderLayer` (`self.midlayer = LlamaDecoderLayer(...)`,
  `self.layers = nn.ModuleList([...])`) and the legacy names load_weights maps onto them
  (`{"midlayer": "layers.0"}` in 0.5.13+ llama_eagle3.py).
"""

from __future__ import annotations

import ast
import os
import warnings
from pathlib import Path
from typing import Any

from analyzer.core.output import write_output
from analyzer.sglang.code_paths_build import dumps
from analyzer.sglang.release_source import SourceMiner, package_version

PREFIX = "models-"
MODELS = "srt/models"
HEAD_FIELDS = {"total_num_heads": "heads", "total_num_kv_heads": "kv_heads"}


def draft_family(name: str) -> str | None:
    lower = name.lower()
    if "eagle3" in lower:
        return "EAGLE3"
    if "eagle" in lower:
        return "EAGLE"
    if lower.endswith(("nextn", "mtp")) or "nextn" in lower or "formtp" in lower:
        return "MTP"
    return None


def _parse(path: Path) -> ast.Module | None:
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            return ast.parse(path.read_text("utf-8", errors="replace"))
    except (OSError, SyntaxError, ValueError):
        return None


def _entry_classes(tree: ast.Module) -> list[str]:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "EntryClass" for t in node.targets
        ):
            value = node.value
            items = value.elts if isinstance(value, ast.List | ast.Tuple) else [value]
            return [i.id for i in items if isinstance(i, ast.Name)]
    return []


def _imported_models(tree: ast.Module) -> list[str]:
    """The sglang.srt.models modules this one imports from (`from sglang.srt.models.llama ...`)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
            "sglang.srt.models."
        ):
            found.append(node.module.rsplit(".", 1)[-1])
    return found


def _head_asserts(tree: ast.Module) -> set[str]:
    """`assert <x>.total_num_heads % tp_size == 0` and its KV twin."""
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        test = node.test
        if not (isinstance(test, ast.Compare) and isinstance(test.left, ast.BinOp)):
            continue
        if not isinstance(test.left.op, ast.Mod):
            continue
        left = test.left.left
        name = left.attr if isinstance(left, ast.Attribute) else getattr(left, "id", "")
        if name in HEAD_FIELDS and "tp_size" in ast.unparse(test.left.right):
            found.add(HEAD_FIELDS[name])
    return found


def _layer_attributes(tree: ast.Module) -> set[str]:
    """`self.X = ...DecoderLayer(...)` or a ModuleList of them, in any class of the module."""
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        target = node.targets[0]
        if not (isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name)):
            continue
        if target.value.id == "self" and "DecoderLayer(" in ast.unparse(node.value):
            found.add(target.attr)
    return found


def _legacy_names(tree: ast.Module, attributes: set[str]) -> set[str]:
    """Keys of the name maps in load_weights whose target starts with a layer attribute."""
    found = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.FunctionDef) and node.name == "load_weights"):
            continue
        for inner in ast.walk(node):
            if not isinstance(inner, ast.Dict):
                continue
            for key, value in zip(inner.keys, inner.values, strict=True):
                if not (isinstance(key, ast.Constant) and isinstance(value, ast.Constant)):
                    continue
                if not (isinstance(key.value, str) and isinstance(value.value, str)):
                    continue
                if value.value.split(".")[0] in attributes:
                    found.add(key.value.split(".")[0])
    return found


def build_model_registry(package: Path) -> dict[str, Any]:
    folder = package / MODELS
    trees = {p.stem: t for p in sorted(folder.glob("*.py")) if (t := _parse(p)) is not None}
    architectures: dict[str, Any] = {}
    for module, tree in trees.items():
        asserts = set(_head_asserts(tree))
        for imported in _imported_models(tree):
            if imported in trees:
                asserts |= _head_asserts(trees[imported])
        for name in _entry_classes(tree):
            entry: dict[str, Any] = {
                "module": f"{MODELS}/{module}.py",
                "draft": draft_family(name),
                "asserts": sorted(asserts),
            }
            if entry["draft"] in ("EAGLE", "EAGLE3"):
                attributes = _layer_attributes(tree)
                entry["layer_names"] = sorted(attributes | _legacy_names(tree, attributes))
            architectures.setdefault(name, entry)
    return {
        "sglang_version": package_version(package),
        "how": "analyzer/sglang/model_registry_build.py: EntryClass of srt/models/*.py",
        # `files` (the key code_paths_build.dumps writes one line each): architecture -> entry
        "files": dict(sorted(architectures.items())),
    }


def write_model_registry(
    path: str | os.PathLike[str], package: Path, flag_catalog: dict[str, Any]
) -> int:
    """Write the model registry; returns how many architectures it lists."""
    data = build_model_registry(package)
    write_output(Path(path), dumps(data), [])
    return len(data["files"])


MINER = SourceMiner(
    "analyzer.sglang.model_registry_build",
    "Mine the architectures of SGLang's model registry: draft family, TP asserts (JSON).",
    PREFIX,
    "architectures",
    write_model_registry,
)
write_beside = MINER.write_beside


if __name__ == "__main__":
    raise SystemExit(MINER.main())

"""Build SGLang's code-path map: for each function of `sglang/srt`, the server arguments it
reads, mined from the release's own source with `ast` (SGLang is never imported).

A runtime failure rarely names the flag at fault, but the code it failed in often only runs,
or only behaves that way, because of one: the draft-extend step of EAGLE reads
`speculative_eagle_topk`, CUDA graph capture reads `enable_torch_compile`. A traceback's
innermost SGLang frames, looked up here, give the settings that code path read; the ones
the user's command set are candidates for the flag at fault (engine/code_paths.py).

What counts as a read of a server argument, `F` being a ServerArgs field of the release's
flag catalog:
- any `X.F` / `X["F"]` / `X.get("F")` where X names server args (`server_args`,
  `self.server_args`, `get_global_server_args()`, `global_server_args_dict`, the
  runtime-context bags of newer releases: `get_spec().F`, `get_flags().capture.F`);
- `self.F` in ServerArgs' own methods (server_args.py, arg_groups/);
- `<anything>.F` when F is a field of several words (`self.enable_torch_compile`, a copy
  the object keeps): one-word fields (`device`, `port`) are read so only through a holder;
- `self.A` where the class set `self.A = <one or two server-argument reads>` (`self.topk =
  server_args.speculative_eagle_topk`).
Methods of one file that share a name are merged (a traceback frame names the function, not
its class). Functions reading more than MAX_READS flags build something (a ModelConfig, the
scheduler) rather than run a feature, and flags read all over the code (`--tp-size`,
`--model-path`: in most of srt's subpackages) point at no feature: both are left out, which
keeps the map small.

    .venv/bin/python -m analyzer.sglang.code_paths_build --python .sglang/venv/bin/python
    .venv/bin/python -m analyzer.sglang.code_paths_build --package-dir .sglang/releases/0.5.13/sglang
"""

from __future__ import annotations

import ast
import json
import os
import warnings
from pathlib import Path
from typing import Any

from analyzer.core.output import write_output
from analyzer.sglang.release_source import SourceMiner, package_version

HOW = (
    "built by `loganalyze catalog build` (analyzer/sglang/code_paths_build.py) with ast from "
    "the release's source; fields mapped to flags through the same release's flag catalog"
)
PREFIX, SUFFIX = "paths-", ".json"
MINED = "srt/**/*.py"
# names and calls that hold the server arguments (or a bag of them) in any release
HOLDER_NAMES = frozenset({"server_args", "global_server_args_dict", "global_server_args"})
HOLDER_CALLS = frozenset({"get_global_server_args", "get_server_args"})
# 0.5.23's runtime_context: typed bags of the server arguments (`get_spec().X`)
BAG_CALLS = frozenset(
    {"get_spec", "get_flags", "get_schedule", "get_serving", "get_exec", "get_parallel"}
)
SERVER_ARGS_FILES = ("srt/server_args.py", "srt/arg_groups/")
# a function reading more flags than this builds something rather than runs a feature
MAX_READS = 8
# a flag read in this share of srt's subpackages (layers/, models/, managers/, ...) or more
# is a general setting (--tp-size, --model-path, --page-size), not a feature's
UBIQUITOUS_SHARE = 0.4
# settings that say which model runs where (on which devices, how many, how it is reached)
# rather than which code runs: read by whatever touches the model or the GPUs, in every
# release, whether or not the statistics above catch them in that one
GENERAL_SETTINGS = frozenset(
    {
        "model_path", "tokenizer_path", "revision", "device", "tp_size", "pp_size", "dp_size",
        "nnodes", "node_rank", "dist_init_addr", "base_gpu_id", "host", "port",
        "served_model_name", "random_seed", "log_level", "trust_remote_code",
    }
)  # fmt: skip
# `self.A = ...` carries a server argument when it reads at most this many
MAX_ALIAS_READS = 2


def _is_holder(node: ast.expr) -> bool:
    """Whether `node` holds server arguments: `server_args`, `x.server_args`,
    `get_global_server_args()`, `get_spec()`, `get_flags().capture`."""
    if isinstance(node, ast.Name):
        return node.id in HOLDER_NAMES
    if isinstance(node, ast.Attribute):
        return node.attr in HOLDER_NAMES or (
            isinstance(node.value, ast.Call) and _call_name(node.value) in BAG_CALLS
        )
    if isinstance(node, ast.Call):
        return _call_name(node) in HOLDER_CALLS | BAG_CALLS
    return False


def _call_name(call: ast.Call) -> str | None:
    func = call.func
    if isinstance(func, ast.Name):
        return func.id
    return func.attr if isinstance(func, ast.Attribute) else None


class _Reader:
    """The server-argument fields an expression or a body reads."""

    def __init__(self, dests: frozenset[str], self_is_args: bool) -> None:
        self.dests = dests
        self.self_is_args = self_is_args
        self.aliases: dict[str, set[str]] = {}  # `self.A` -> fields, for the current class
        self.holders: set[str] = set()  # locals given a holder: `sa = self.server_args`

    def reads(self, node: ast.AST) -> set[str]:
        found: set[str] = set()
        for sub in ast.walk(node):
            if isinstance(sub, ast.Assign) and _is_holder(sub.value):
                self.holders.update(t.id for t in sub.targets if isinstance(t, ast.Name))
            found |= self._read(sub)
        return found

    def _read(self, node: ast.AST) -> set[str]:
        if isinstance(node, ast.Attribute):
            name, base = node.attr, node.value
            on_self = isinstance(base, ast.Name) and base.id == "self"
            if on_self and name in self.aliases:
                return self.aliases[name]
            if name not in self.dests:
                return set()
            held = _is_holder(base) or (isinstance(base, ast.Name) and base.id in self.holders)
            if held or (on_self and self.self_is_args) or "_" in name:
                return {name}
            return set()
        if isinstance(node, ast.Subscript) and _is_holder(node.value):
            key = node.slice
            if isinstance(key, ast.Constant) and key.value in self.dests:
                return {key.value}
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr == "get" and _is_holder(node.func.value) and node.args:
                key = node.args[0]
                if isinstance(key, ast.Constant) and key.value in self.dests:
                    return {key.value}
        return set()


def _functions(body: list[ast.stmt]):
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            yield node


def _class_aliases(cls: ast.ClassDef, reader: _Reader) -> dict[str, set[str]]:
    """`self.A = <one or two server-argument reads>` anywhere in the class's methods."""
    aliases: dict[str, set[str]] = {}
    for method in _functions(cls.body):
        for node in ast.walk(method):
            if not isinstance(node, ast.Assign) or len(node.targets) != 1:
                continue
            target = node.targets[0]
            if not (
                isinstance(target, ast.Attribute)
                and isinstance(target.value, ast.Name)
                and target.value.id == "self"
                and target.attr not in reader.dests
            ):
                continue
            fields = reader.reads(node.value)
            if 0 < len(fields) <= MAX_ALIAS_READS:
                aliases.setdefault(target.attr, set()).update(fields)
    return aliases


def mine_file(path: Path, rel: str, dests: frozenset[str]) -> dict[str, set[str]]:
    """Function name -> the fields it reads, for one source file."""
    try:
        with warnings.catch_warnings():  # a release's invalid escapes are not ours to report
            warnings.simplefilter("ignore")
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    except (SyntaxError, UnicodeDecodeError, ValueError):
        return {}
    self_is_args = rel.startswith(SERVER_ARGS_FILES)
    reads: dict[str, set[str]] = {}

    def visit(function: ast.FunctionDef | ast.AsyncFunctionDef, reader: _Reader) -> None:
        reader.holders = set()
        found = reader.reads(function)
        reads.setdefault(function.name, set()).update(found)
        for inner in _functions(function.body):  # a nested function is a frame of its own
            visit(inner, reader)

    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            reader = _Reader(dests, self_is_args)
            reader.aliases = _class_aliases(node, reader)
            for method in _functions(node.body):
                visit(method, reader)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            visit(node, _Reader(dests, self_is_args))
    return reads


def _subpackage(rel: str) -> str:
    """`srt/layers/moe/topk.py` -> `layers`; a module of srt itself is its own."""
    parts = rel.split("/")
    return parts[1] if len(parts) > 2 else rel


def build_code_paths(package: Path, flag_catalog: dict[str, Any]) -> dict[str, Any]:
    """The code-path map of the release at `package`, flags from its `flag_catalog`."""
    long_of: dict[str, str] = {}
    for option in flag_catalog["options"]:
        strings = option["option_strings"]
        long_of.setdefault(
            option["dest"], next((s for s in strings if s.startswith("--")), strings[0])
        )
    dests = frozenset(long_of)
    mined: dict[str, dict[str, set[str]]] = {}
    for path in sorted(package.glob(MINED)):
        rel = path.relative_to(package).as_posix()
        functions = mine_file(path, rel, dests)
        if functions:
            mined[rel] = functions
    packages: dict[str, set[str]] = {}
    for rel, functions in mined.items():
        for field in set().union(*functions.values()):
            packages.setdefault(field, set()).add(_subpackage(rel))
    every = {_subpackage(rel) for rel in mined}
    ubiquitous = {f for f, seen in packages.items() if len(seen) >= UBIQUITOUS_SHARE * len(every)}
    ubiquitous |= GENERAL_SETTINGS & dests
    files: dict[str, dict[str, list[str]]] = {}
    for rel, functions in mined.items():
        for name, fields in sorted(functions.items()):
            kept = fields - ubiquitous
            if kept and len(fields) <= MAX_READS:
                files.setdefault(rel, {})[name] = sorted({long_of[f] for f in kept})
    return {
        "sglang_version": package_version(package),
        "flag_catalog": flag_catalog.get("sglang_version"),
        "how": HOW,
        "ubiquitous": sorted(long_of[f] for f in ubiquitous),
        "files": files,
    }


def dumps(paths: dict[str, Any]) -> str:
    """Deterministic JSON, one file per line (reviewable diffs, small files)."""
    head = {k: v for k, v in paths.items() if k != "files"}
    lines = [
        f" {json.dumps(rel)}: {json.dumps(paths['files'][rel], sort_keys=True)}"
        for rel in sorted(paths["files"])
    ]
    body = json.dumps(head, sort_keys=True, ensure_ascii=False, indent=1)[:-2]
    return body + ',\n "files": {\n' + ",\n".join(lines) + "\n }\n}\n"


def write_code_paths(
    path: str | os.PathLike[str], package: Path, flag_catalog: dict[str, Any]
) -> int:
    """Write the code-path map; returns how many functions it lists."""
    paths = build_code_paths(package, flag_catalog)
    write_output(Path(path), dumps(paths), [])
    return sum(len(functions) for functions in paths["files"].values())


MINER = SourceMiner(
    "analyzer.sglang.code_paths_build",
    "Mine the server arguments each SGLang function reads (JSON).",
    PREFIX,
    "functions",
    write_code_paths,
)
write_beside = MINER.write_beside


if __name__ == "__main__":
    raise SystemExit(MINER.main())

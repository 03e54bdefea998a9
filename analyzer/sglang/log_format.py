"""How SGLang writes its log lines: the `[time DPn TPn]` and Ray prefixes, the `server_args`
startup record (and the launch command it implies), the version a line states.

Knowledge of SGLang's output, not a pipeline stage: the scanner, the metrics reader and the
correction stage all read lines through it.
"""

from __future__ import annotations

import ast
import re
import shlex
import warnings
from collections.abc import Callable
from typing import Any

import regex

from analyzer.core.lazy_pattern import LazyPattern
from analyzer.core.model import Line
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.derived_fields import derived_fields

RECONSTRUCTED_ENTRY = "python -m sglang.launch_server"
ANSI = LazyPattern(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# a tqdm bar's own text (`50%|#####`, `[00:01<00:02`), to tell it from a line it overwrote
PROGRESS_BAR = LazyPattern(r"\d%\||\[\d+:\d\d(?::\d\d)?<")
SGLANG_PREFIX = LazyPattern(
    r"^\[(?P<ts>\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?)?"
    r"(?P<ranks>(?:\s*(?:DP|TP|EP|PP|CP|ATTN_DP|ATTN_TP|MOE_EP)\d+)*)\s*\]\s?"
)
RANK = LazyPattern(r"(DP|TP|EP|PP|CP|ATTN_DP|ATTN_TP|MOE_EP)(\d+)")
RAY_PREFIX = re.compile(
    r"^\((?P<actor>[A-Za-z_][\w.]*)?\s*pid=(?P<pid>\d+)(?:,\s*ip=[^)]*)?\)\s?"
)
# torchrun's rank label (`[rank0]: `), also inside a Ray worker's line
TORCHRUN_RANK = re.compile(r"\[(?:rank|default)\d+\]: ?")
# `sglang==0.5.13`, `sglang-0.5.13` (pip install), `sglang   0.5.13` (pip list),
# `sglang version 0.5.13`; every one holds "sglang", a launch hint, so it is fed already.
# `regex` searches by the literal `sglang` (`re` tries the `\b` at every position)
STATED_VERSION = regex.compile(
    r"\bsglang(?:==|-|\s+(?:version:?\s*)?v?)(?P<version>\d+\.\d+\.\d+(?:\.post\d+)?)\b"
)
# `...` standing for left-out fields of a pasted record (a positional after keywords)
ELIDED = LazyPattern(r"(?<=[(,])\s*\.\.\.\s*(?:,|(?=\)))")
PIP_SHOW_NAME = "Name: sglang"
PIP_SHOW_VERSION = LazyPattern(r"^Version: (?P<version>\d+\.\d+\.\d+(?:\.post\d+)?)\s*$")


def visible(raw: str) -> str:
    """A line as a terminal shows it: colour codes removed, and of the text a `\\r` returned
    over (progress bars redrawn, another process's line written after one) the last that
    is not a bar."""
    text = ANSI.sub("", raw) if "\x1b" in raw else raw
    if "\r" not in text:
        return text
    drawn = [part for part in text.split("\r") if part.strip()]
    written = [part for part in drawn if not PROGRESS_BAR.search(part)]
    return (written or drawn or [""])[-1]


def split_prefix(
    source: str,
    number: int,
    raw: str,
    user_span: Callable[[str], tuple[int, int, int]] | None = None,
    pasted: str | None = None,
) -> Line:
    """Build a Line: strip colour codes, then split off SGLang's and Ray's prefixes.

    `user_span` says where SGLang's own text lies between what a user's tool put in front
    of it (docker compose, grep -n) and after it (rich's path column;
    analyzer/engine/normalize.py), and how many layers of them it carried: `text` keeps
    them, `body` is what lies between.
    """
    text = visible(raw)
    if pasted is None and "\r" in raw:
        pasted = raw
    body, actor, timestamp, ranks, wrappers = text, None, None, (), 0
    if user_span is not None:
        start, end, wrappers = user_span(text)
        body = text[start:end]
    ray = RAY_PREFIX.match(body)
    if ray:
        actor = f"{ray['actor'] or 'pid'} pid={ray['pid']}"
        body = body[ray.end() :]
        if body.startswith("["):
            rank = TORCHRUN_RANK.match(body)
            body = body[rank.end() :] if rank else body
    if body.startswith("["):
        prefix = SGLANG_PREFIX.match(body)
        if prefix and (prefix["ts"] or prefix["ranks"].strip()):
            timestamp = prefix["ts"]
            ranks = tuple((k, int(v)) for k, v in RANK.findall(prefix["ranks"]))
            body = body[prefix.end() :]
    return Line(
        source, number, text, body, timestamp, ranks, actor, wrappers=wrappers, pasted=pasted
    )


def _parse_python(text: str) -> ast.expr:
    """ast.parse of logged text, without Python's escape-sequence warnings about it."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ast.parse(text, mode="eval").body


def parse_server_args(body: str) -> dict[str, Any] | None:
    """Parse the startup record: `server_args={...}` (0.5.x) or `server_args=ServerArgs(...)`.

    Values that are not Python literals (enum reprs, objects) are kept as source text.
    """
    if "server_args={" in body:
        return _parse_server_args_dict(body[body.index("server_args={") + len("server_args=") :])
    start = body.find("ServerArgs(")
    if start < 0:
        return None
    text = body[start:].strip()
    try:
        call = _parse_python(text)
    except SyntaxError:
        # a record shortened by hand: `ServerArgs(model_path='...', tp_size=8, ...)`
        text = ELIDED.sub("", text)
        try:
            call = _parse_python(text)
        except SyntaxError:
            return None
    if not isinstance(call, ast.Call):
        return None
    settings: dict[str, Any] = {}
    for keyword in call.keywords:
        if keyword.arg is None:
            continue
        try:
            settings[keyword.arg] = ast.literal_eval(keyword.value)
        except (ValueError, SyntaxError, TypeError, RecursionError):
            settings[keyword.arg] = ast.get_source_segment(text, keyword.value)
    return settings


def _parse_server_args_dict(text: str) -> dict[str, Any] | None:
    try:
        node = _parse_python(text.strip())
    except SyntaxError:
        return None
    if not isinstance(node, ast.Dict):
        return None
    settings: dict[str, Any] = {}
    for key, value in zip(node.keys, node.values, strict=True):
        if not isinstance(key, ast.Constant) or not isinstance(key.value, str):
            continue
        try:
            settings[key.value] = ast.literal_eval(value)
        except (ValueError, SyntaxError, TypeError, RecursionError):
            settings[key.value] = ast.get_source_segment(text.strip(), value)
    return settings


def stated_version(body: str, previous: str | None = None) -> str | None:
    """The SGLang version a line states; `previous` is the line before (pip show)."""
    stated = STATED_VERSION.search(body)
    if stated is None and previous is not None and previous.strip() == PIP_SHOW_NAME:
        stated = PIP_SHOW_VERSION.match(body.strip())
    return stated["version"] if stated else None


def reconstruct_command(server_args: dict[str, Any], catalog: FlagCatalog) -> str:
    """Rebuild a launch command from ServerArgs: every non-default value the user could have
    typed becomes a flag. What the release may resolve, derive or draw itself (a random
    seed, a copied path, a chosen backend or size: sglang/derived_fields.py) is left out,
    but for a required argument, which only the user gives."""
    derived = derived_fields(catalog.version)
    parts = [RECONSTRUCTED_ENTRY]
    for dest in sorted(server_args):
        spec = catalog.by_dest(dest)
        value = server_args[dest]
        if spec is None or value is None or value == spec.default:
            continue
        if (dest in derived and not spec.required) or _redacted(value):
            continue
        if spec.action == "store_true":
            if value is True:
                parts.append(spec.long)
            continue
        if spec.action == "store_false" or isinstance(value, (dict, bool)) and spec.type != "str":
            continue
        values = value if isinstance(value, list) else [value]
        if not values:
            continue
        parts.append(spec.long)
        parts.extend(shlex.quote(str(v)) for v in values)
    return " ".join(parts)


def _redacted(value: Any) -> bool:
    """A secret the record hides: the user typed something else."""
    return isinstance(value, str) and ("<redacted>" in value or "***" in value)

"""The fix of a model path that does not load: a near-identical sibling folder, or the
remote code the checkpoint needs; the checkpoint's own files are outside the command."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from pathlib import Path

from analyzer.core.model import Edit, Finding
from analyzer.repair.fixes import FixContext, FixPlan, typed_argument
from analyzer.sglang.launch_command import MODEL_PATH_FLAGS

SIMILAR_PATH = 0.8


def nearest_path(finding: Finding, ctx: FixContext) -> FixPlan:
    """A local path that does not exist: name its flag; propose a near-identical sibling.

    Code the model needs: transformers' dynamic_module_utils.resolve_trust_remote_code asks
    for `trust_remote_code=True`, SGLang's --trust-remote-code passes it.
    """
    message = " ".join(line.body for line in finding.match.evidence)
    if finding.match.groups.get("needs_remote_code") and not ctx.typed("--trust-remote-code"):
        note = "the checkpoint ships its own model code: --trust-remote-code lets it run"
        named = [f for f in MODEL_PATH_FLAGS if (v := typed_argument(ctx, f)) and v in message]
        return FixPlan([Edit("add", "--trust-remote-code")], [note], named)
    for flag in MODEL_PATH_FLAGS:
        path = typed_argument(ctx, flag)
        if not path or path not in message:
            continue
        return _sibling_plan(flag, path)
    model = typed_argument(ctx, "--model-path")
    if model and Path(model, "config.json").is_file():
        # the model is here and loads no further: its files or the install, not a flag
        return FixPlan([], [], outside_command=True)
    return FixPlan()


def _sibling_plan(flag: str, path: str) -> FixPlan:
    folder = Path(path)
    if folder.exists():
        # the path is right and the files in it are not: the download, not the command
        return FixPlan([], [], [flag], outside_command=True)
    if not folder.parent.is_dir():
        return FixPlan([], [], [flag])
    siblings = sorted(p.name for p in folder.parent.iterdir() if p.is_dir())
    close = difflib.get_close_matches(folder.name, siblings, n=1, cutoff=SIMILAR_PATH)
    if not close:
        note = f"{path} does not exist; {folder.parent} holds: {', '.join(siblings) or 'nothing'}"
        return FixPlan([], [note], [flag])
    new = str(folder.parent / close[0])
    return FixPlan([Edit("set", flag, value=new)], [f"{path} does not exist; {new} does"], [flag])


PATH_FIXES: dict[str, Callable[[Finding, FixContext], FixPlan]] = {
    "nearest_path": nearest_path,
}

"""The dependency-names builder: names SGLang imports from its dependencies, their aliases,
and which of them a module binds only under a guard."""

from __future__ import annotations

from pathlib import Path

from analyzer.sglang.dependency_names_build import build

MODULE = """
from sgl_kernel import rmsnorm
from transformers import AutoConfig

if is_cuda():
    from sgl_kernel import build_tree_kernel as sgl_build_tree_kernel
    from transformers import AutoConfig as _AutoConfig
try:
    from sgl_kernel import top_k_renorm_prob
except ImportError:
    top_k_renorm_prob = None
if is_hip():
    from sgl_kernel import fused_gate
    from typing import Mapping


def fused_gate(x):
    return x


def forward(x):
    if x:
        from sgl_kernel import lazy_kernel
    return lazy_kernel(x)
"""


def _release(tmp_path: Path) -> Path:
    site = tmp_path / "site"
    (site / "sglang-9.9.9.dist-info").mkdir(parents=True)
    (site / "sglang-9.9.9.dist-info" / "METADATA").write_text(
        "Name: sglang\nRequires-Dist: sgl-kernel\nRequires-Dist: transformers\n", "utf-8"
    )
    (site / "sglang").mkdir()
    (site / "sglang" / "mod.py").write_text(MODULE, "utf-8")
    return site / "sglang"


def test_an_alias_is_recorded_beside_the_name(tmp_path):
    names = build([_release(tmp_path)])["names"]
    assert names["sgl_build_tree_kernel"] == ["sgl_kernel"]
    assert names["build_tree_kernel"] == ["sgl_kernel"]
    assert names["rmsnorm"] == ["sgl_kernel"]


def test_guarded_names_are_those_only_a_guarded_import_binds(tmp_path):
    guarded = build([_release(tmp_path)])["guarded"]
    # under `if` / `try`, the fallback `= None` in the except branch belongs to the guard
    assert "sgl_build_tree_kernel" in guarded and "top_k_renorm_prob" in guarded
    # imported unguarded elsewhere, SGLang's own def, a function's local import, the stdlib
    for name in ("rmsnorm", "AutoConfig", "fused_gate", "lazy_kernel", "Mapping", "_AutoConfig"):
        assert (name in guarded) == (name == "_AutoConfig"), name

"""Build `catalogs/dependency_names.json`: the names SGLang imports from the packages it
depends on, so a traceback's `Class.method()` can be traced to the package that defines it.

    python -m analyzer.sglang.dependency_names_build OUT SGLANG_DIR [SGLANG_DIR ...]

Each SGLANG_DIR is a release's `sglang` package folder beside its `sglang-*.dist-info`. The
dependencies are the distributions that dist-info requires (`Requires-Dist`), and what those
require in turn when they are installed beside it (torch brings triton); a module is one of
them when its name is the distribution's or starts it (`flashinfer` for `flashinfer_python`,
`dateutil` for `python-dateutil`, `deep_gemm` for SGLang's fork `sgl-deep-gemm`). `from flashinfer import BatchPrefillWithPagedKVCacheWrapper`
in any .py file of a release gives `BatchPrefillWithPagedKVCacheWrapper -> flashinfer`.
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Sequence
from pathlib import Path

REQUIRES = re.compile(r"^Requires-Dist: *([A-Za-z0-9][A-Za-z0-9._-]*)", re.M)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _requires(metadata: Path) -> set[str]:
    if not metadata.is_file():
        return set()
    return {_norm(n) for n in REQUIRES.findall(metadata.read_text(encoding="utf-8", errors="replace"))}


def dependencies(package: Path) -> set[str]:
    """Normalised distribution names the release beside `package` requires (one level on)."""
    site = package.parent
    direct: set[str] = set()
    for info in site.glob("sglang-*.dist-info"):
        direct |= _requires(info / "METADATA")
    found = set(direct)
    for info in site.glob("*.dist-info"):
        dist = _norm(info.name.split("-")[0])
        if dist in direct:
            found |= _requires(info / "METADATA")
    return found - {"sglang"}


def is_dependency(module: str, dists: set[str]) -> bool:
    m = _norm(module)
    for dist in dists:
        d = re.sub(r"^python_|_python$", "", dist)  # python-dateutil, cuda-python
        if d == m or d.startswith(m + "_") or ("_" in m and d == "sgl_" + m):
            return True
    return False


def imported_names(package: Path, dists: set[str]) -> dict[str, set[str]]:
    names: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom) or node.level or not node.module:
                continue
            top = node.module.split(".")[0]
            if top == "sglang" or top in sys.stdlib_module_names or not is_dependency(top, dists):
                continue
            for alias in node.names:
                if alias.name != "*":
                    names.setdefault(alias.name, set()).add(top)
    return names


def build(packages: Sequence[Path]) -> dict[str, object]:
    names: dict[str, set[str]] = {}
    for package in packages:
        for name, tops in imported_names(package, dependencies(package)).items():
            names.setdefault(name, set()).update(tops)
    return {
        "how": "built by analyzer/sglang/dependency_names_build.py with ast from the releases' "
        "source: `from PACKAGE import NAME` for the packages each release requires",
        "names": {name: sorted(names[name]) for name in sorted(names)},
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    data = build([Path(a) for a in args[1:]])
    Path(args[0]).write_text(json.dumps(data, indent=0, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Build `catalogs/dependency_names.json`: the names SGLang imports from the packages it
depends on, so a traceback's `Class.method()` can be traced to the package that defines it.

    python -m analyzer.sglang.dependency_names_build OUT SGLANG_DIR [SGLANG_DIR ...]

Each SGLANG_DIR is a release's `sglang` package folder beside its `sglang-*.dist-info`. The
dependencies are the distributions that dist-info requires (`Requires-Dist`), and what those
require in turn when they are installed beside it (torch brings triton); a module is one of
them when its name is the distribution's or starts it (`flashinfer` for `flashinfer_python`,
`dateutil` for `python-dateutil`, `deep_gemm` for SGLang's fork `sgl-deep-gemm`). `from flashinfer import BatchPrefillWithPagedKVCacheWrapper`
in any .py file of a release gives `BatchPrefillWithPagedKVCacheWrapper -> flashinfer`; an
alias is recorded beside the name (`from sgl_kernel import build_tree_kernel as
sgl_build_tree_kernel` gives both names `-> sgl_kernel`).
"""

from __future__ import annotations

import ast
import json
import re
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

REQUIRES = re.compile(r"^Requires-Dist: *([A-Za-z0-9][A-Za-z0-9._-]*)", re.M)


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "_", name).lower()


def _requires(metadata: Path) -> set[str]:
    if not metadata.is_file():
        return set()
    return {
        _norm(n) for n in REQUIRES.findall(metadata.read_text(encoding="utf-8", errors="replace"))
    }


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


def unguarded_names(tree: ast.AST, guarded: bool = False, local: bool = False) -> set[str]:
    """The names SGLang's code binds outside a guard: its functions, classes and assignments,
    the stdlib names it imports and what a module body imports from another package. A
    NameError for one of them is no skipped import (SGLang's own bug, or a name any program
    uses); a guard's fallback (`except ImportError: top_k_renorm_prob = None`) and a kernel a
    function imports when called are the guarded import's kind, as are SGLang's re-exports."""
    bound: set[str] = set()
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            if not guarded:
                bound.add(child.name)
            bound |= unguarded_names(child, local=local or not isinstance(child, ast.ClassDef))
        elif isinstance(child, ast.Name) and isinstance(child.ctx, ast.Store):
            if not guarded:
                bound.add(child.id)
        elif isinstance(child, (ast.Import, ast.ImportFrom)):
            module = (
                child.module if isinstance(child, ast.ImportFrom) else child.names[0].name
            ) or ""
            top = module.split(".")[0]
            own = getattr(child, "level", 0) or top == "sglang"
            if not guarded and not own and (not local or top in sys.stdlib_module_names):
                bound |= {(a.asname or a.name).split(".")[0] for a in child.names}
        else:
            inner = guarded or isinstance(child, (ast.If, ast.Try, ast.TryStar))
            bound |= unguarded_names(child, inner, local)
    return bound


def _imports(tree: ast.AST, guarded: bool = False) -> Iterator[tuple[ast.ImportFrom, bool]]:
    """Each `from X import ...` with whether it is guarded: under an `if` or `try` of a
    module or class body, so skipping it leaves the module's name undefined (a NameError
    where it is used; inside a function the name would be a local, an UnboundLocalError)."""
    for child in ast.iter_child_nodes(tree):
        if isinstance(child, ast.ImportFrom):
            yield child, guarded
        elif isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            yield from ((node, False) for node, _ in _imports(child))
        else:
            yield from _imports(child, guarded or isinstance(child, (ast.If, ast.Try, ast.TryStar)))


def imported_names(
    package: Path, dists: set[str], guarded: set[str] | None = None, own: set[str] | None = None
) -> dict[str, set[str]]:
    """The names the release imports from its dependencies, by package; `guarded` collects
    the names a module binds only when a guarded import ran, `own` those bound unguarded."""
    names: dict[str, set[str]] = {}
    for path in sorted(package.rglob("*.py")):
        try:
            tree = ast.parse(path.read_text(encoding="utf-8", errors="replace"))
        except SyntaxError:
            continue
        if own is not None:
            own |= unguarded_names(tree)
        for node, conditional in _imports(tree):
            if node.level or not node.module:
                continue
            top = node.module.split(".")[0]
            if top == "sglang" or top in sys.stdlib_module_names or not is_dependency(top, dists):
                continue
            for alias in node.names:
                if alias.name == "*":
                    continue
                # the package's own name (a traceback's `Class.method()`) and the one the
                # module binds (`import build_tree_kernel as sgl_build_tree_kernel`: a NameError's)
                bound = alias.asname or alias.name
                for name in {alias.name, bound}:
                    names.setdefault(name, set()).add(top)
                if conditional and guarded is not None:
                    guarded.add(bound)
    return names


def build(packages: Sequence[Path]) -> dict[str, object]:
    names: dict[str, set[str]] = {}
    guarded: set[str] = set()
    own: set[str] = set()
    for package in packages:
        for name, tops in imported_names(package, dependencies(package), guarded, own).items():
            names.setdefault(name, set()).update(tops)
    return {
        "how": "built by analyzer/sglang/dependency_names_build.py with ast from the releases' "
        "source: `from PACKAGE import NAME [as ALIAS]` (NAME and ALIAS) for the packages each "
        "release requires",
        "names": {name: sorted(names[name]) for name in sorted(names)},
        # bound only when an `if` / `try` at module or class level ran the import, and
        # nowhere without one (a def, class, assignment or import of the name)
        "guarded": sorted(guarded - own),
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

"""The house rules of the layout, read from the source (issue: folders are the architecture).

No import circle among the project's modules (imports inside functions count: a circle
deferred is still a circle), no module over 600 lines, at most 8 modules directly in
analyzer/, and one shell lexer.
"""

from __future__ import annotations

import ast
from pathlib import Path

ANALYZER = Path(__file__).resolve().parent.parent / "analyzer"
MAX_LINES = 600


def _module_name(path: Path) -> str:
    parts = path.relative_to(ANALYZER.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in ANALYZER.rglob("*.py")}


def import_graph() -> dict[str, set[str]]:
    """module -> the project modules it imports (`from pkg import mod` counts as pkg.mod)."""
    modules = _modules()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                targets = [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
            for target in targets:
                if target in modules and target != name and not _is_package_of(target, name):
                    graph[name].add(target)
    return graph


def _is_package_of(target: str, name: str) -> bool:
    return name.startswith(target + ".") and (ANALYZER.parent / target.replace(".", "/")).is_dir()


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_no_import_circle():
    assert find_cycle(import_graph()) is None, " -> ".join(find_cycle(import_graph()) or [])


def test_the_cycle_finder_finds_a_planted_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]


def test_no_module_over_600_lines():
    long = {
        str(p.relative_to(ANALYZER.parent)): n
        for p in ANALYZER.rglob("*.py")
        if (n := len(p.read_text("utf-8").splitlines())) > MAX_LINES
    }
    assert long == {}


def test_at_most_8_modules_directly_in_analyzer():
    top = sorted(p.name for p in ANALYZER.glob("*.py"))
    assert len(top) <= 8, top


def test_one_shell_lexer():
    lexers = [
        str(p.relative_to(ANALYZER.parent))
        for p in ANALYZER.rglob("*.py")
        for node in ast.walk(ast.parse(p.read_text("utf-8")))
        if isinstance(node, ast.ClassDef) and "Lexer" in node.name
    ]
    assert len(lexers) == 1, lexers

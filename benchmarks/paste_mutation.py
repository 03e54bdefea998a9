"""Paste-mutation probe: how the verdict holds up when a log is pasted the ways users paste.

    python benchmarks/paste_mutation.py                 # changed inputs per mutation
    python benchmarks/paste_mutation.py --json
    python benchmarks/paste_mutation.py --show wrap-80  # the inputs one mutation changes

Each mutation (MUTATIONS, a small table) rewrites an input's text the way a terminal, a web
page, an editor or a JSON export mangles it; the probe analyses the mutated copy and counts
the inputs whose verdict (benchmarks/wild_score.py: predict) differs from the original's.
Inputs: the wild corpus's cases that are not held out, and the real logs of fixtures/real.
Held-out cases are skipped by their sidecar's `source` line alone; their inputs are never
opened.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.wild_score import WILD, Case, _input, predict, read_held_out  # noqa: E402

REAL = ROOT / "fixtures" / "real"
TEXT_SUFFIXES = (".log", ".txt")
PROGRESS = "Loading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01,  1.52it/s]"


def hard_wrap(width: int) -> Callable[[str], str]:
    """A terminal's cut: every line longer than `width` continues on the next, no prefix."""

    def wrap(text: str) -> str:
        out = []
        for line in text.split("\n"):
            while len(line) > width:
                out.append(line[:width])
                line = line[width:]
            out.append(line)
        return "\n".join(out)

    return wrap


def html_escape(text: str) -> str:
    """A rendered page's source or an HTML/JSON export: markup characters as entities."""
    for raw, entity in (("&", "&amp;"), ("<", "&lt;"), (">", "&gt;"), ('"', "&quot;"),
                        ("'", "&#39;")):  # fmt: skip
        text = text.replace(raw, entity)
    return text


def details(text: str) -> str:
    """GitHub's collapsed block around a fenced log."""
    return f"<details>\n<summary>Full log</summary>\n\n```\n{text.rstrip()}\n```\n\n</details>\n"


def tabs(text: str) -> str:
    """An editor that indents with tabs: each four leading spaces become one."""
    out = []
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        out.append("\t" * (indent // 4) + " " * (indent % 4) + line[indent:])
    return "\n".join(out)


def nbsp(text: str) -> str:
    """A rendered page's indentation and space runs: non-breaking spaces."""
    out = []
    for line in text.split("\n"):
        indent = len(line) - len(line.lstrip(" "))
        out.append("\u00a0" * indent + line[indent:].replace("  ", " \u00a0"))
    return "\n".join(out)


def zero_width(text: str) -> str:
    """A chat client's byte-order mark and zero-width break hints after `/` and `_`."""
    return "\ufeff" + text.replace("/", "/\u200b").replace("_", "_\u200b")


def smart_quotes(text: str) -> str:
    """A word processor's or a chat client's typographic quotes."""
    out, double = [], False
    for c in text:
        if c == '"':
            out.append("\u201d" if double else "\u201c")
            double = not double
        elif c == "'":
            out.append("\u2019")
        else:
            out.append(c)
    return "".join(out)


def progress_bars(text: str) -> str:
    """tqdm's `\\r` updates captured in front of every fifth line (another rank's bar)."""
    lines = text.split("\n")
    return "\n".join(
        f"{PROGRESS}\r{line}" if i % 5 == 4 and line else line for i, line in enumerate(lines)
    )


def json_string(text: str) -> str:
    """A log stored in a JSON string and pasted raw: one line, `\\n` between its lines."""
    return json.dumps(text)[1:-1] + "\n"


MUTATIONS: dict[str, Callable[[str], str]] = {
    "wrap-80": hard_wrap(80),
    "wrap-100": hard_wrap(100),
    "wrap-120": hard_wrap(120),
    "wrap-160": hard_wrap(160),
    "html-escape": html_escape,
    "details": details,
    "tabs": tabs,
    "nbsp": nbsp,
    "zero-width": zero_width,
    "smart-quotes": smart_quotes,
    "cr-progress": progress_bars,
    "json-string": json_string,
}


@dataclass
class Input:
    name: str
    path: Path


def _source(sidecar: Path) -> str:
    """The sidecar's `source`, read up to that line and no further."""
    with open(sidecar, encoding="utf-8") as f:
        for line in f:
            if line.startswith("source"):
                return tomllib.loads(line)["source"]
    return ""


def inputs() -> list[Input]:
    held = read_held_out()
    found = []
    for sidecar in sorted(WILD.glob("*.toml")):
        if _source(sidecar) in held:
            continue
        data = tomllib.loads(sidecar.read_text("utf-8"))
        if "expect" not in data:
            continue
        path = _input(sidecar, data.get("fixture", {}))
        if path.suffix in TEXT_SUFFIXES:
            found.append(Input(f"wild/{sidecar.stem}", path))
    found += [Input(f"real/{p.stem}", p) for p in sorted(REAL.glob("*.log"))]
    return found


def verdict(path: Path) -> str:
    case = Case(path.stem, path, "", "", [], "high")
    predict(case)
    return case.predicted


def run(only: list[str]) -> dict:
    cases = inputs()
    original = {c.name: verdict(c.path) for c in cases}
    changed: dict[str, list[str]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, mutate in MUTATIONS.items():
            if only and name not in only:
                continue
            changed[name] = []
            for case in cases:
                text = case.path.read_text("utf-8", errors="replace")
                copy = Path(tmp) / case.path.name
                copy.write_text(mutate(text), "utf-8")
                now = verdict(copy)
                if now != original[case.name]:
                    changed[name].append(f"{case.name}: {original[case.name]} -> {now}")
    return {"inputs": len(cases), "changed": changed}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--show", action="append", default=[], metavar="MUTATION")
    parser.add_argument("--only", action="append", default=[], metavar="MUTATION")
    args = parser.parse_args()
    result = run(args.only or args.show)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
        return
    print(f"{result['inputs']} inputs; verdicts changed per mutation:")
    for name, changed in result["changed"].items():
        print(f"  {name:<14} {len(changed)}")
        if name in args.show:
            print("".join(f"      {c}\n" for c in changed), end="")


if __name__ == "__main__":
    main()

"""Offending flags on SGLang's own runtime messages: what the analyzer names when a user
pastes one of them, measured on SGLang's source rather than on fixtures.

    python benchmarks/flag_probe.py                 # the installed release (0.5.23)
    python benchmarks/flag_probe.py --all-releases  # and every release under .sglang/releases
    python benchmarks/flag_probe.py --misses 20     # the first misses, to read

Beyond the startup raise sites (benchmarks/raise_site_score.py and the error catalog's
own figure), SGLang raises, asserts and logs on its runtime path: the model runner, graph
runners, memory pools, the scheduler and TP worker, speculative workers, model loading,
attention backends, distributed init. The probe mines those with the error catalog's own
`ast` miner (logged warnings and errors too) and keeps the messages that name or imply a
server argument:

- named: the message's literal text spells a flag of the release's catalog, as an option
  (`--mem-fraction-static`), a ServerArgs field (`mem_fraction_static`) or in prose
  (`context length`, `chunked prefill size`, `TP size`: a run of two or more words that
  is a field's name);
- implied: the guarding condition or the message's fields read a server argument
  (`server_args.X`, `self.server_args.X`, `self.X` assigned from one). A parameter that
  merely shares a field's name (`device`, `dtype`) is no read here: on the runtime path it
  is a tensor's device, not the server's.

Each message is rendered (fields become sample values) and pasted two ways: alone (the
exception line, or the log line), and under a short traceback whose innermost frame is the
site's file and function. A paste is right when the root incident's offending flags hold
every named flag (when the message names one), else at least one implied flag; `extra`
counts the right ones that also name a flag neither named nor implied. Logged messages
(a warning or error that does not end the process) are scored apart: alone they are no
failure, so only the traceback form counts, and for them a flag is expected only when
named.
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analyzer.core.model import severity_rank  # noqa: E402
from analyzer.pipeline import Options, analyze  # noqa: E402
from analyzer.sglang.catalog import FlagCatalog, load_catalog  # noqa: E402
from analyzer.sglang.error_catalog_build import (  # noqa: E402
    Miner,
    _Where,
    build_error_catalog,
)
from analyzer.sglang.error_source import exits  # noqa: E402
from analyzer.sglang.flag_history import shipped_history  # noqa: E402
from analyzer.sglang.release_source import flag_catalog_data, package_version  # noqa: E402

SGLANG = ROOT.parent / "main" / ".sglang"
INSTALLED = sorted((SGLANG / "venv" / "lib").glob("python3*/site-packages/sglang"))
RELEASES = SGLANG / "releases"
RUNTIME_FILES = (
    "srt/model_executor/**/*.py",
    "srt/mem_cache/**/*.py",
    "srt/managers/scheduler*.py",
    "srt/managers/scheduler_*/**/*.py",
    "srt/managers/tp_worker*.py",
    "srt/speculative/**/*.py",
    "srt/model_loader/**/*.py",
    "srt/layers/attention/**/*.py",
    "srt/distributed/**/*.py",
)
LOGGED = frozenset({"warning", "warn", "error", "critical", "exception"})
SAMPLE_NUMBER, SAMPLE_TEXT = "8", "x1"
PREFIX = "[2025-06-01 10:00:00 TP0] "
OPTION = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*[a-z0-9]")
FIELD = re.compile(
    r"(?:(?<![\w.])|(?<=self\.)|(?<=server_args\.))[a-z][a-z0-9]*(?:_[a-z0-9]+)+(?![\w(])"
)
WORD = re.compile(r"[a-z][a-z0-9]*")


class LoggedMiner(Miner):
    """The error catalog's miner, also recording logged warnings and errors (kind `log`),
    with no parameter read as a server argument by its name alone."""

    def scope_for(self, func, mod, sa_names, self_is_sa, depth):
        scope = super().scope_for(func, mod, sa_names, self_is_sa, depth)
        scope.params = set()
        return scope

    def _visit_block(self, at: _Where, body: list[ast.stmt], guards) -> None:
        for index, node in enumerate(body):
            call = node.value if isinstance(node, ast.Expr) else None
            if (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr in LOGGED
                and isinstance(call.func.value, ast.Name)
                and "log" in call.func.value.id.lower()
                and call.args
                and not (call.func.attr != "warning" and exits(body[index + 1 : index + 3]))
            ):
                self._add(at, node, "log", "log", self._message(at, *call.args), guards)
        super()._visit_block(at, body, guards)


@dataclass
class Probe:
    """One message: where, its rendered text, the flags it names and implies."""

    release: str
    site: dict[str, Any]
    text: str
    named: list[str]
    implied: list[str]

    @property
    def logged(self) -> bool:
        return self.site["kind"] == "log"

    @property
    def expected(self) -> set[str]:
        return set(self.named) | set(self.implied)


@dataclass
class Tally:
    cases: int = 0
    right: int = 0
    extra: int = 0
    misses: list[str] = field(default_factory=list)

    def line(self, name: str) -> str:
        share = self.right / self.cases if self.cases else 0.0
        return (
            f"{name}: right flag {self.right}/{self.cases} ({share:.1%}), "
            f"with a flag neither named nor implied {self.extra}"
        )


def named_flags(literal_text: str, catalog: FlagCatalog) -> list[str]:
    """The flags a message's literal text spells (the probe's own reading, not the
    analyzer's): options, ServerArgs fields, and fields in prose."""
    text = literal_text.lower()
    found = [f for f in (catalog.canonical(o) for o in OPTION.findall(text)) if f]
    found += [s.long for s in (catalog.by_dest(d) for d in FIELD.findall(text)) if s]
    # prose: words between spaces, hyphens read as spaces (`kv-cache-dtype`); a token
    # holding `_`, `/`, `=` or a dotted name is an identifier or a path, no prose
    prose = " ".join(w for w in text.split() if not re.search(r"[_/=]|\.\w", w))
    words = WORD.findall(prose.replace("-", " "))
    for size in (5, 4, 3, 2):
        for start in range(len(words) - size + 1):
            run = words[start : start + size]
            exact = catalog.by_dest("_".join(run))
            if exact:
                found.append(exact.long)
    return list(dict.fromkeys(found))


def _literal_text(message: str) -> str:
    """A catalog message's literal text: `{expr}` fields dropped, doubled braces undone."""
    text = re.sub(r"(?<!\{)\{(?!\{)[^{}]*\}", " ", message)
    return text.replace("{{", "{").replace("}}", "}")


def _rendered(message: str) -> str:
    """A catalog message with sample values for its fields."""

    def value(m: re.Match[str]) -> str:
        return (
            SAMPLE_NUMBER
            if re.search(r"size|num|len|count|bs|tokens|:d", m.group(0))
            else SAMPLE_TEXT
        )

    text = re.sub(r"(?<!\{)\{(?!\{)[^{}]*\}", value, message)
    return text.replace("{{", "{").replace("}}", "}").strip()


def probes(package: Path) -> list[Probe]:
    version = package_version(package)
    catalog = load_catalog(version)
    history = shipped_history()
    data = build_error_catalog(
        package, flag_catalog_data(catalog.version), RUNTIME_FILES, LoggedMiner
    )
    found = []
    for site in data["entries"]:
        named = named_flags(_literal_text(site["message"]), catalog)
        implied = (
            []
            if site["kind"] == "log"
            else sorted(set(site["condition_flags"]) | set(site["flags"]))
        )
        named = [history.spelling(f, catalog) for f in named]
        implied = [history.spelling(f, catalog) for f in implied]
        if not named and not implied:
            continue
        text = _rendered(site["message"]) if site["message"] else ""
        if not text and site["kind"] != "assert":
            continue
        found.append(Probe(version, site, text, named, implied))
    return found


def pastes(probe: Probe) -> dict[str, str]:
    site = probe.site
    if probe.logged:
        exception = None
        head = PREFIX + probe.text.split("\n", 1)[0]
    else:
        exception = f"{site['exception']}: {probe.text}" if probe.text else site["exception"]
        head = exception
    frame = (
        f'  File "/usr/local/lib/python3.11/site-packages/sglang/{site["file"]}", '
        f"line {site['line']}, in {site['function'].rsplit('.', 1)[-1]}\n"
    )
    outer = (
        '  File "/usr/local/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", '
        "line 2000, in run_scheduler_process\n"
    )
    forms = {}
    if probe.logged:
        # a logged line, then the crash it explains, raised in the same function
        crash = "RuntimeError: x1"
        forms["traceback"] = f"{head}\nTraceback (most recent call last):\n{outer}{frame}{crash}\n"
    else:
        if probe.text:
            forms["alone"] = head + "\n"
        forms["traceback"] = f"Traceback (most recent call last):\n{outer}{frame}{exception}\n"
    return forms


def judge(probe: Probe, reported: list[str]) -> tuple[bool, bool]:
    """(right, with an extra flag)."""
    got = set(reported)
    if probe.named:
        right = set(probe.named) <= got
    else:
        right = bool(got & set(probe.implied))
    return right, right and bool(got - probe.expected)


def reported_flags(text: str, folder: Path) -> list[str]:
    path = folder / "paste.log"
    path.write_text(text, "utf-8")
    report = analyze([str(path)], Options())
    failures = [i for i in report.incidents if severity_rank(i.severity) < severity_rank("warning")]
    return list(failures[0].offending_flags) if failures else []


def run(packages: list[Path], misses: int) -> dict[str, Tally]:
    tallies: dict[str, Tally] = {}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for package in packages:
            for probe in probes(package):
                for form, text in pastes(probe).items():
                    kind = "logged" if probe.logged else "raised"
                    key = f"{kind} {form}, {'named' if probe.named else 'implied only'}"
                    tally = tallies.setdefault(key, Tally())
                    got = reported_flags(text, folder)
                    right, extra = judge(probe, got)
                    tally.cases += 1
                    tally.right += right
                    tally.extra += extra
                    if not right and len(tally.misses) < misses:
                        site = probe.site
                        tally.misses.append(
                            f"  {probe.release} {site['file']}:{site['line']} {site['kind']} "
                            f"named {probe.named} implied {probe.implied} got {got}\n"
                            f"    {text.strip().splitlines()[-1][:160]}"
                        )
    return tallies


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--all-releases", action="store_true")
    parser.add_argument("--misses", type=int, default=0, help="print this many misses per form")
    args = parser.parse_args()
    packages = list(INSTALLED[:1])
    if args.all_releases:
        packages += sorted(RELEASES.glob("*/sglang"))
    tallies = run(packages, args.misses)
    releases = ", ".join(package_version(p) for p in packages)
    print(f"runtime messages naming or implying a server argument, sglang {releases}:")
    for key in sorted(tallies):
        print(tallies[key].line(key))
        for miss in tallies[key].misses:
            print(miss)
    raised = [t for k, t in tallies.items() if k.startswith("raised")]
    total = Tally(
        sum(t.cases for t in raised), sum(t.right for t in raised), sum(t.extra for t in raised)
    )
    print(total.line("raised, both forms"))


if __name__ == "__main__":
    main()

"""The one case type and its loader, for the two shapes a case takes (docs/testing.md#cases).

A sidecar case is an input file with a TOML sidecar beside it: `[fixture]` says where the input
comes from, `[expect]` what the analyzer must report. An inline case is a `[[cases]]` entry of
a rule file: its input is its lines, its expectation that the rule fires or does not.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import tomllib

if TYPE_CHECKING:
    from analyzer.rulebook.vocabulary import Rule

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
INPUT_SUFFIXES = (".log", ".txt", ".json", ".jsonl", ".gz", ".log.gz")


@dataclass(frozen=True)
class Case:
    id: str
    expect: dict[str, Any]
    fixture: dict[str, Any] = field(default_factory=dict)
    sidecar: Path | None = None  # the TOML file of a sidecar case
    lines: tuple[str, ...] = ()  # the input of an inline case
    data: dict[str, Any] = field(default_factory=dict, repr=False)  # the whole sidecar

    @property
    def name(self) -> str:
        """The case's own name: its sidecar's (or its folder's), without the folders above."""
        return Path(self.id).name

    @property
    def input(self) -> Path:
        """A sidecar case's input: `[fixture] input`, else the file (or folder) of its name
        beside it; a folder's `case.toml` describes the folder."""
        assert self.sidecar is not None, f"{self.id}: an inline case's input is its lines"
        if "input" in self.fixture:
            return self.sidecar.parent / self.fixture["input"]
        for suffix in INPUT_SUFFIXES:
            candidate = self.sidecar.with_suffix(suffix)
            if candidate.exists():
                return candidate
        if self.sidecar.with_suffix("").is_dir():
            return self.sidecar.with_suffix("")
        if self.sidecar.name == "case.toml":
            return self.sidecar.parent
        raise FileNotFoundError(
            f"{self.sidecar}: no input beside it (expected {self.sidecar.stem}.log or similar)"
        )

    def input_in(self, folder: Path) -> Path:
        """The input as a file: an inline case's lines are written to `folder/case.log`."""
        if self.sidecar is not None:
            return self.input
        log = folder / "case.log"
        log.write_text("\n".join(self.lines) + "\n", encoding="utf-8")
        return log

    @property
    def user_command(self) -> str | None:
        """The recorded command is given as --command unless the log prints it itself."""
        if self.fixture.get("command_in_log") or self.fixture.get("input_format"):
            return None
        return self.fixture.get("command")


def read_sidecar(sidecar: Path, expect: str = "expect", fixture: str = "fixture") -> Case:
    """One sidecar; `expect`/`fixture` name its tables where a corpus calls them otherwise
    (fixtures/multinode: `[story]`, `[multinode]`; fixtures/preflight: `[preflight]`)."""
    data = tomllib.loads(sidecar.read_text("utf-8"))
    name = sidecar.parent if sidecar.name == "case.toml" else sidecar.with_suffix("")
    case_id = str(name.relative_to(FIXTURES)) if name.is_relative_to(FIXTURES) else name.name
    return Case(case_id, data.get(expect, {}), data.get(fixture, {}), sidecar, data=data)


def sidecar_cases(folder: Path, pattern: str = "*.toml", expect: str = "expect") -> list[Case]:
    """The sidecars of a folder that hold an expectation, in name order."""
    cases = [read_sidecar(p, expect) for p in sorted(folder.glob(pattern))]
    return [c for c in cases if expect in c.data]


def fixture_cases() -> list[Case]:
    """The cases tests/test_fixtures.py asserts one by one."""
    measured = {"models", "wild", "fragments"}  # wild/, fragments/: by benchmarks/*_score.py
    return [
        case
        for case in sidecar_cases(FIXTURES, "**/*.toml")
        if not measured & set(Path(case.id).parts)
    ]


def rule_cases(rules: list[Rule]) -> list[Case]:
    """Every rule's inline `[[cases]]`, as cases of that rule."""
    return [
        Case(f"{rule.id}-{index}", {"rule": rule.id, "fires": case.fires}, lines=case.lines)
        for rule in rules
        for index, case in enumerate(rule.cases)
    ]

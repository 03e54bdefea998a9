"""Discovery of fixtures and their expectation sidecars (shared by the generic runners)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomllib

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
INPUT_SUFFIXES = (".log", ".txt", ".json", ".jsonl", ".gz", ".log.gz")


@dataclass
class FixtureCase:
    sidecar: Path
    input: Path
    fixture: dict[str, Any]
    expect: dict[str, Any]

    @property
    def id(self) -> str:
        return str(self.sidecar.relative_to(FIXTURES).with_suffix(""))

    @property
    def user_command(self) -> str | None:
        """The recorded command is given as --command unless the log prints it itself."""
        if self.fixture.get("command_in_log") or self.fixture.get("input_format"):
            return None
        return self.fixture.get("command")


def _input_for(sidecar: Path, fixture: dict[str, Any]) -> Path:
    if "input" in fixture:
        return sidecar.parent / fixture["input"]
    for suffix in INPUT_SUFFIXES:
        candidate = sidecar.with_suffix(suffix)
        if candidate.exists():
            return candidate
    raise FileNotFoundError(
        f"{sidecar}: no input beside it (expected {sidecar.stem}.log or similar)"
    )


def fixture_cases() -> list[FixtureCase]:
    cases = []
    for sidecar in sorted(FIXTURES.rglob("*.toml")):
        folders = sidecar.relative_to(FIXTURES).parts
        if "models" in folders or "wild" in folders or "fragments" in folders:
            continue  # wild/, fragments/: measured by benchmarks/*_score.py, not asserted case by case
        data = tomllib.loads(sidecar.read_text("utf-8"))
        if "expect" not in data:
            continue
        fixture = data.get("fixture", {})
        cases.append(FixtureCase(sidecar, _input_for(sidecar, fixture), fixture, data["expect"]))
    return cases

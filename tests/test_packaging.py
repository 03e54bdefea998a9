"""The rules and catalogs ship inside the wheel and are found after a non-editable install."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

from tests.fixture_cases import ROOT

PROBE = """
import analyzer, json, sys
from analyzer.rulebook.vocabulary import load_rules
from analyzer.rulebook.raise_site_rules import site_families
from analyzer.sglang.catalog import load_catalog
from analyzer.agents.mcp_command import skill_text
print(json.dumps({"file": analyzer.__file__, "rules": len(load_rules()),
                  "catalog": load_catalog().version, "families": len(site_families()),
                  "skill": skill_text().splitlines()[1]}))
"""


def _build_wheel(out: Path) -> Path:
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(out),
            str(ROOT),
        ],
        check=True,
    )
    return next(out.glob("loganalyze-*.whl"))


def test_wheel_contains_rules_and_catalog_and_works_installed(tmp_path: Path):
    wheel = _build_wheel(tmp_path / "dist")
    names = zipfile.ZipFile(wheel).namelist()
    shipped_rules = sorted(p.name for p in (ROOT / "rules").glob("*.toml"))
    assert (
        sorted(
            n.split("/")[-1]
            for n in names
            if n.startswith("analyzer/rules/") and n.endswith(".toml")
        )
        == shipped_rules
    )
    assert "analyzer/catalogs/sglang-0.5.23.json" in names
    assert "analyzer/agents/skills/loganalyze/SKILL.md" in names

    target = tmp_path / "site"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-deps",
            "-q",
            "--target",
            str(target),
            str(wheel),
        ],
        check=True,
    )
    env = {**os.environ, "PYTHONPATH": str(target)}
    probe = subprocess.run(
        [sys.executable, "-c", PROBE],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    import json

    found = json.loads(probe.stdout)
    assert found["file"].startswith(str(target))
    assert found["rules"] == len(shipped_rules)
    assert found["catalog"] == "0.5.23"
    assert found["families"] >= 10  # analyzer/catalogs/raise_sites.toml ships too
    assert found["skill"] == "name: loganalyze"  # the agent skill file (docs/agents.md)

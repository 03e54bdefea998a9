"""The registry of everything the tool can report (analyzer/incidents/finding_registry.py):
every id an incident can carry is an entry, ids are unique, and `loganalyze rules` lists
them all."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from analyzer.incidents.finding_registry import (
    KIND_CHECK,
    KIND_COMPARISON,
    KIND_FALLBACK,
    KIND_FAMILY,
    KIND_NODES,
    KIND_PHASE,
    KIND_SESSION,
    KIND_SIGNAL,
    KIND_TOML,
    priorities,
    registry,
)
from analyzer.rulebook.frame_phases import frame_phases
from analyzer.rulebook.raise_site_rules import site_families
from analyzer.rulebook.vocabulary import load_rules

ROOT = Path(__file__).resolve().parent.parent
RULES = load_rules([])


def test_every_kind_has_its_entries_and_ids_are_unique():
    entries = registry(RULES)
    kinds = {e.kind for e in entries}
    assert kinds == {
        KIND_TOML,
        KIND_CHECK,
        KIND_FALLBACK,
        KIND_FAMILY,
        KIND_PHASE,
        KIND_SESSION,
        KIND_COMPARISON,
        KIND_SIGNAL,
        KIND_NODES,
    }
    ids = [e.id for e in entries]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    assert {f.rule_id for f in site_families()} <= set(ids)
    assert {p.rule_id for p in frame_phases()} <= set(ids)
    assert all(e.doc.detects and e.doc.why and e.doc.fix for e in entries)


def _minted_ids() -> set[str]:
    """The rule ids the code writes into an Incident (`rule="..."` or a *_RULE constant)."""
    found: set[str] = set()
    for path in (ROOT / "analyzer").rglob("*.py"):
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.keyword) and node.arg == "rule":
                for value in ast.walk(node.value):
                    if isinstance(value, ast.Constant) and isinstance(value.value, str):
                        found.add(value.value)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                names = [t.id for t in node.targets if isinstance(t, ast.Name)]
                if any(n.endswith("_RULE") for n in names) and isinstance(node.value.value, str):
                    found.add(node.value.value)
    return found


def test_every_id_minted_in_code_is_an_entry():
    ids = {e.id for e in registry(RULES)}
    minted = _minted_ids()
    assert {"unknown", "death-cause", "client-error", "request-refused"} <= minted
    assert minted - ids == set()


def test_the_priority_order_ranks_catalog_findings_with_the_generic_rule():
    order = priorities(RULES)
    generic = min(r.priority for r in RULES if r.generic)
    assert order[site_families()[0].rule_id] == generic
    assert order[frame_phases()[0].rule_id] == generic
    assert order["client-error"] == 0
    assert "unknown" not in order  # ranks at the default
    assert not any(k.startswith("raise-site:") for k in priorities(RULES, catalogs=False))


def test_the_priority_order_is_the_whole_registrys():
    """priorities() leaves out the kinds that never rank; an entry of them given a priority
    would be lost from the order: this holds the two equal."""
    for sessions in (True, False):
        for catalogs in (True, False):
            entries = registry(RULES, sessions, catalogs)
            whole = {e.id: e.priority for e in entries if e.priority is not None}
            assert priorities(RULES, sessions, catalogs) == whole


def test_loganalyze_rules_lists_every_entry():
    out = subprocess.run(
        [sys.executable, "-m", "analyzer", "rules"],
        capture_output=True,
        text=True,
        check=True,
        cwd=ROOT,
    ).stdout
    listed = {line.split("  ", 1)[0] for line in out.splitlines() if "  [" in line}
    assert listed == {e.id for e in registry(RULES)}


def test_every_signal_kind_the_stage_can_mint_is_an_entry():
    """The signal stage names its findings `signal-<kind>` in code (an f-string the ast walk
    above cannot read): each kind it knows, and each library of its catalog, is an entry."""
    from analyzer.signals.failure_lines import catalog_entries
    from analyzer.signals.incident import KIND_TITLES

    ids = {e.id for e in registry(RULES)}
    kinds = set(KIND_TITLES) | {e.kind for e in catalog_entries()}
    assert {f"signal-{k}" for k in kinds} <= ids

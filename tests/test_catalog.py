"""FlagCatalog lookups mirror argparse on SGLang 0.5.23's real parser."""

from __future__ import annotations

import pytest

from analyzer.repair.fixes import foreign_flags, replacement_for
from analyzer.sglang.catalog import CatalogError, load_catalog, shipped_versions

CATALOG = load_catalog("0.5.23")


def test_newest_shipped_catalog_is_the_default():
    assert load_catalog().version == shipped_versions()[-1]
    with pytest.raises(CatalogError, match="no catalog for sglang 0.0.1"):
        load_catalog("0.0.1")


@pytest.mark.parametrize(
    ("typed", "kind", "canonical"),
    [
        ("--tp-size", "exact", "--tp-size"),
        ("--tensor-parallel-size", "alias", "--tp-size"),
        ("--tp", "prefix", "--tp-size"),
        ("--speculative-num-draft-token", "prefix", "--speculative-num-draft-tokens"),
        ("--cuda-graph-max-bs", "ambiguous", None),
        ("--num-speculative-tokens", "unknown", None),
        ("--tp-size=8", "exact", "--tp-size"),
    ],
)
def test_resolution_matches_argparse(typed, kind, canonical):
    resolution = CATALOG.resolve(typed)
    assert resolution.kind == kind
    assert CATALOG.canonical(typed) == canonical


def test_ambiguous_prefix_lists_its_candidates():
    assert CATALOG.resolve("--cuda-graph-max-bs").candidates == (
        "--cuda-graph-max-bs-decode",
        "--cuda-graph-max-bs-prefill",
    )


def test_values_are_checked_against_type_and_switches():
    assert CATALOG.check_value("--tp-size", "8") is None
    assert "expects int" in CATALOG.check_value("--tp-size", "two")
    assert CATALOG.check_value("--mem-fraction-static", "0.85") is None
    assert CATALOG.check_value("--disable-cuda-graph", None) is None
    assert CATALOG.takes_value("--disable-cuda-graph") is False
    assert CATALOG.takes_value("--model-path") is True
    assert CATALOG.takes_value("--nope") is None


def test_dest_names_map_to_long_options():
    assert CATALOG.by_dest("speculative_eagle_topk").long == "--speculative-eagle-topk"


def test_every_foreign_flag_target_exists_in_the_catalog():
    for flag, entry in foreign_flags().items():
        if entry["to"]:
            assert CATALOG.spec(entry["to"]), f"{flag} -> {entry['to']} is not an SGLang flag"


@pytest.mark.parametrize(
    ("typed", "expected"),
    [
        ("--num-speculative-tokens", "--speculative-num-draft-tokens"),
        ("--gpu-memory-utilization", "--mem-fraction-static"),
        ("--max-model-len", "--context-length"),
        ("--speculative-model", "--speculative-draft-model-path"),
        ("--speculative_num_steps", "--speculative-num-steps"),
        ("--speculative-num-step-count", "--speculative-num-steps"),
    ],
)
def test_replacement_for_unknown_flags(typed, expected):
    assert replacement_for(typed, CATALOG)[0] == expected


def test_no_replacement_is_invented_for_a_flag_with_no_match():
    target, note = replacement_for("--frobnicate-widgets", CATALOG)
    assert target is None
    assert "closest:" in note

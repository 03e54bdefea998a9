"""A command rebuilt from SGLang's `server_args=ServerArgs(...)` record holds only what the
user could have typed: the fields the release resolves, derives or draws itself (read from
its source by analyzer/sglang/derived_fields_build.py) are left out."""

from __future__ import annotations

import json

import pytest

from analyzer.formats.json_report import render_json
from analyzer.pipeline import Options, analyze
from analyzer.sglang.catalog import load_catalog
from analyzer.sglang.derived_fields import derived_fields, shipped_derived_versions
from analyzer.sglang.derived_fields_build import build_derived_fields
from analyzer.sglang.launch_command import parse_launch_command
from analyzer.sglang.log_format import reconstruct_command
from analyzer.sglang.release_source import flag_catalog_data
from tests.fixture_cases import FIXTURES, ROOT

RECORDS = sorted(
    p
    for p in FIXTURES.rglob("*")
    if p.suffix in (".log", ".txt")
    and "models" not in p.parts
    and "server_args=ServerArgs(" in p.read_text("utf-8", errors="replace")
)
# where scripts/install-sglang.sh puts SGLang 0.5.23, inside this checkout
INSTALLED = next(iter(sorted(ROOT.glob(".sglang/venv/lib/python3*/site-packages/sglang"))), ROOT)


def test_every_shipped_release_has_its_derived_fields():
    assert "0.5.23" in shipped_derived_versions()
    fields = derived_fields("0.5.23")
    # drawn (the seed), copied (the tokenizer path), chosen (backends, sizes) by SGLang
    assert {"random_seed", "tokenizer_path", "served_model_name", "attention_backend"} <= fields
    # what only the user says: the model, the parallelism, the algorithm they asked for
    assert not {"tp_size", "speculative_algorithm", "host", "port"} & fields


def test_the_rebuilt_command_leaves_out_what_sglang_set():
    catalog = load_catalog("0.5.23")
    record = {
        "model_path": "/models/llama",
        "tokenizer_path": "/models/llama",
        "served_model_name": "/models/llama",
        "random_seed": 343102663,
        "tp_size": 2,
        "watermark_config": "<redacted>",
    }
    assert (
        reconstruct_command(record, catalog)
        == "python -m sglang.launch_server --model-path /models/llama --tp-size 2"
    )


@pytest.mark.parametrize("path", RECORDS, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_no_rebuilt_command_holds_a_derived_flag(path):
    report = json.loads(render_json(analyze([str(path)], Options())))
    catalog = load_catalog(report["sglang_catalog"])
    derived = derived_fields(catalog.version)
    for incident in report["incidents"]:
        if incident["command_source"] != "reconstructed":
            continue
        parsed = parse_launch_command(incident["command"], catalog.takes_value)
        assert parsed is not None
        for argument in parsed.arguments:
            spec = catalog.spec(argument.flag)
            assert spec is None or spec.required or spec.dest not in derived, argument.flag


@pytest.mark.sglang
@pytest.mark.skipif(INSTALLED == ROOT, reason="SGLang 0.5.23's source is not installed")
def test_the_shipped_list_is_the_installed_release_mined_again():
    built = build_derived_fields(INSTALLED, flag_catalog_data("0.5.23"))
    assert frozenset(built["fields"]) == derived_fields("0.5.23")

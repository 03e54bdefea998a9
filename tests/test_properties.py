"""Property tests: mutated real fixtures never raise, give valid JSON, and the same bytes twice."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from analyzer.formats.json_report import render_json
from analyzer.pipeline import analyze
from tests.fixture_cases import fixture_cases

LOGS = [c.input for c in fixture_cases() if c.input.suffix == ".log" and c.input.stat().st_size]


@st.composite
def mutated(draw):
    data = bytearray(draw(st.sampled_from(LOGS)).read_bytes())
    for _ in range(draw(st.integers(0, 8))):
        at = draw(st.integers(0, max(len(data) - 1, 0)))
        choice = draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        if not data:
            break
        if choice == "flip":
            data[at] = draw(st.integers(0, 255))
        elif choice == "cut":
            del data[at:]
        elif choice == "insert":
            data[at:at] = draw(st.binary(max_size=64))
        else:
            del data[at : at + draw(st.integers(1, 400))]
    return bytes(data)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(mutated())
def test_mutated_fixtures_give_valid_deterministic_json(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("prop") / "run.log"
    path.write_bytes(data)
    first = render_json(analyze([str(path)]))
    second = render_json(analyze([str(path)]))
    assert first == second
    parsed = json.loads(first)
    assert parsed["schema_version"] == 1
    assert parsed["verdict"]

"""Over every corpus in fixtures/: an input that shows a failure never gets "no incident", and
a negative (class none) never gets a fatal or error incident.

The held-out third of a corpus (`held_out.txt`) is measured by its scoreboard, never by the
tests rule authors run. NO_FAILURE_SHOWN lists the inputs whose expected class is a failure
the input itself does not show (a log that stops; a build that succeeded for the wrong
platform): the thread told the failure, not the paste.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analyzer.pipeline import Options, analyze
from benchmarks.fragments_score import read_held_out as fragments_held_out
from benchmarks.wild_score import read_held_out
from tests.fixture_cases import FIXTURES, sidecar_cases

NO_FAILURE_SHOWN = {
    # dynamo waits for the worker's ready signal; the log ends there with no error line
    "wild/g_stall_waiting_sglang0_dynamo480",
    # the wheel build succeeds; the wrong platform tag in its file name is the whole story
    "wild/p_env_sgl_kernel_aarch64_wheel_tag_3970",
}
SERIOUS = ("fatal", "error")


def _cases() -> list[tuple[str, Path, dict, dict]]:
    held = read_held_out()
    held_fragments = {f"fragments/{name}" for name in fragments_held_out()}
    found = []
    for case in sidecar_cases(FIXTURES, "**/*.toml"):
        folders = Path(case.id).parts
        if "models" in folders or "held_out" in folders or case.fixture.get("source") in held:
            continue
        try:
            path = case.input
        except FileNotFoundError:
            continue
        if case.id in held_fragments:
            continue
        found.append((case.id, path, case.fixture, case.expect))
    return found


CASES = _cases()


@pytest.mark.parametrize(("name", "path", "fixture", "expect"), CASES, ids=[c[0] for c in CASES])
def test_a_failure_shown_is_never_silent_and_a_negative_never_fails(name, path, fixture, expect):
    command = None
    if not fixture.get("command_in_log") and not fixture.get("input_format"):
        command = fixture.get("command")
    try:
        report = analyze([str(path)], Options(command=command))
    except Exception as error:  # a release no catalog covers: refused with a clear message
        assert "no catalog" in str(error), error
        return
    if expect.get("class") == "none":
        serious = [(i.rule, i.severity) for i in report.incidents if i.severity in SERIOUS]
        assert serious == [], serious
    elif name not in NO_FAILURE_SHOWN:
        assert report.incidents, "a failure shown, and no incident"

"""`loganalyze mcp` driven over stdio by the mcp SDK's own client (issue 37).

One server process for the whole scenario (its start-up is most of the cost): list the
tools, call each on fixtures, hold `analyze` and `metrics` to what the CLI prints for the
same inputs, then feed it bad input and check that each is a one-line tool error and that
the server still answers after it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

import anyio
from mcp.client import Client
from mcp.client.stdio import StdioServerParameters

from analyzer.sglang.catalog import all_catalogs, load_catalog
from tests.fixture_cases import FIXTURES, ROOT, read_sidecar

# each description says when an agent should call the tool
WHEN = {
    "analyze": "an SGLang launch that failed",
    "preflight": "before running it",
    "flag": "Call it when an error names a flag",
    "error_catalog": "Call it for an exception",
    "metrics": "Call it when a server came up but is slow",
}
TOOLS = set(WHEN)
LOGS = [
    "fixtures/real/unrecognized_dollar_wrapper.log",
    "fixtures/real/intent_eagle3_draft_as_eagle.log",
    "fixtures/real/incompatible_hicache_without_radix.log",
    "fixtures/transcripts/claude_unrecognized_then_assertion.jsonl",
    "fixtures/transcripts/codex_code_mode_apply_patch_spec_assertion.jsonl",
]
RAISED = "fixtures/real/incompatible_hicache_without_radix.log"
WITHOUT_COMMAND = FIXTURES / "real" / "invalid_choice_dtype"  # the runner passes --command
PASTED = "fixtures/real/unrecognized_set_x_wrapper.log"
METRICS_LOG = "fixtures/metrics/sglang-0.5.23-eagle3.log"
TARGET = ROOT / "fixtures" / "models" / "llama-target"
PASTE_LIMIT_CHARS = 10_000_000


def cli(*args: str, stdin: bytes | None = None) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "analyzer", *args],
        input=stdin,
        capture_output=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert "Traceback" not in done.stderr.decode(), done.stderr.decode()
    return json.loads(done.stdout)


def verdicts(report: dict[str, Any]) -> list[tuple[str, list[str], str | None]]:
    return [(i["class"], i["offending_flags"], i["corrected_command"]) for i in report["incidents"]]


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    text = result.content[0].text
    assert not result.is_error, text
    assert json.loads(text) == result.structured_content  # the text an agent reads is the JSON
    return result.structured_content


async def refused(client: Client, tool: str, **arguments: Any) -> str:
    """The tool error's text, after checking the server still answers a good call."""
    result = await client.call_tool(tool, arguments)
    assert result.is_error
    text = result.content[0].text
    after = await call(client, "flag", flag="--tp")
    assert after["option"]["long"] == load_catalog().resolve("--tp").spec.long
    return text


def test_tools_over_stdio(tmp_path):
    sidecar = read_sidecar(WITHOUT_COMMAND.with_suffix(".toml"))
    command = sidecar.fixture["command"]
    given = str(WITHOUT_COMMAND.with_suffix(".log").relative_to(ROOT))
    pasted = (ROOT / PASTED).read_bytes()
    expected = {
        "logs": cli(*LOGS, "--format", "json"),
        "command": cli(given, "--command", command, "--format", "json"),
        "paste": cli("-", "--format", "json", stdin=pasted),
        "metrics": cli("metrics", METRICS_LOG, "--format", "json"),
    }
    binary = tmp_path / "core.bin"
    binary.write_bytes(bytes(range(256)) * 64)
    launch = (
        f"nohup python -m sglang.launch_server --model-path {TARGET} --device cpu "
        "--speculative-algo EAGLE3 --tp-sizee 1 > server.log 2>&1 &"
    )
    raised = next(i for i in expected["logs"]["incidents"] if i["source"] == RAISED)
    exception_line = raised["evidence"][-1]["text"]
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "analyzer", "mcp"], cwd=ROOT, env=dict(os.environ)
    )

    async def scenario() -> tuple[dict, dict, dict]:
        got, errors = {}, {}
        async with Client(params) as client:
            listed = (await client.list_tools()).tools
            tools = {tool.name: tool for tool in listed}
            got["logs"] = await call(client, "analyze", paths=LOGS)
            got["command"] = await call(client, "analyze", paths=[given], command=command)
            got["paste"] = await call(client, "analyze", text=pasted.decode())
            got["metrics"] = await call(client, "metrics", paths=METRICS_LOG)  # one path: a string
            got["preflight"] = await call(client, "preflight", command=launch, folder=str(tmp_path))
            got["prefix"] = await call(client, "flag", flag="--speculative-algo")
            got["removed"] = await call(client, "flag", flag="--cuda-graph-max-bs")
            got["sites"] = await call(client, "error_catalog", message=exception_line)
            errors["missing"] = await refused(client, "analyze", paths=[str(tmp_path / "x.log")])
            errors["binary"] = await refused(client, "analyze", paths=[str(binary)])
            errors["huge"] = await refused(client, "analyze", text="y" * 100_000_000)
            errors["quote"] = await refused(
                client, "preflight", command="python -m sglang.launch_server --model-path 'm"
            )
            errors["not_sglang"] = await refused(client, "preflight", command="ls -la")
            errors["stdin"] = await refused(client, "analyze", paths=["-"])
        return tools, got, errors

    tools, got, errors = anyio.run(scenario)

    assert set(tools) == TOOLS
    for name, tool in tools.items():
        assert tool.annotations.read_only_hint and not tool.annotations.destructive_hint
        assert WHEN[name] in tool.description
    assert "Never launches or stops anything" in tools["analyze"].description
    assert "Never starts the server" in tools["preflight"].description

    # analyze is the JSON report of the same inputs, byte for byte apart from `cut`
    assert got["logs"].pop("cut") == []
    assert got["logs"] == expected["logs"]
    assert any(v[2] for v in verdicts(got["logs"])) and any(v[1] for v in verdicts(got["logs"]))
    assert verdicts(got["command"]) == verdicts(expected["command"])
    assert (
        got["command"]["incidents"][0]["corrected_command"]
        == sidecar.expect["corrected_command"]
    )
    assert verdicts(got["paste"]) == verdicts(expected["paste"]) != []
    assert [s["path"] for s in got["paste"]["inputs"]] == ["<paste>"]
    assert got["metrics"].pop("cut") == []
    assert got["metrics"] == expected["metrics"]

    # pre-flight: the agent's own text back with only the edit applied, nothing started
    flight = got["preflight"]
    assert flight["verdict"] == "refused"
    assert flight["corrected_command"] == launch.replace("--tp-sizee", "--tp-size")
    assert "--tp-size" in flight["report"] and flight["sglang"] == {"status": "skipped"}
    assert [(p["check"], p["class"]) for p in flight["problems"]] == [
        ("flags", "argparse_unrecognized")
    ]
    assert not (tmp_path / "server.log").exists()

    assert got["prefix"]["reading"] == "prefix"
    assert got["prefix"]["option"]["long"] == "--speculative-algorithm"
    history = {h["sglang"]: h["reading"] for h in got["removed"]["history"]}
    assert history == {c.version: c.resolve("--cuda-graph-max-bs").kind for c in all_catalogs()}
    assert got["removed"]["change"]  # removed or renamed in the newest release

    site = got["sites"]["sites"][0]
    assert got["sites"]["matched_by"] == "message"
    file, line = site["where"].rsplit(":", 1)
    assert raised["raise_site"]["file"].endswith(file) and raised["raise_site"]["line"] == int(line)
    assert {"--enable-hierarchical-cache", "--disable-radix-cache"} <= set(site["flags"])

    assert "no such file" in errors["missing"]
    assert "binary" in errors["binary"]
    assert f"{PASTE_LIMIT_CHARS:,}" in errors["huge"]
    assert "never closes" in errors["quote"]
    assert "no SGLang launch" in errors["not_sglang"]
    assert "stdin" in errors["stdin"]
    for text in errors.values():
        assert "\n" not in text and "Traceback" not in text


def test_without_the_mcp_extra_the_cli_still_works_and_mcp_names_the_extra():
    blocked = "import sys; sys.modules['mcp'] = None; from analyzer.cli import main; "
    heavy = ("analyzer.agents.mcp_server", "analyzer.agents.agent_tools", "pydantic", "anyio")
    served = subprocess.run(
        [sys.executable, "-c", blocked + "sys.argv = ['loganalyze', 'mcp']; main()"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert served.returncode == 2
    assert served.stderr.count("\n") == 1 and "loganalyze[mcp]" in served.stderr
    assert "Traceback" not in served.stderr and served.stdout == ""

    analysed = subprocess.run(
        [
            sys.executable,
            "-c",
            blocked
            + f"HEAVY = {heavy!r}; sys.argv = ['loganalyze', {LOGS[0]!r}, '--format', 'json']\n"
            "try:\n    main()\nexcept SystemExit as exit:\n"
            "    loaded = [m for m in sys.modules if m.startswith(HEAVY)]\n"
            "    print(exit.code, loaded, file=sys.stderr)",
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert analysed.stderr.strip() == "1 []"  # a report with an incident; no agent code loaded
    assert json.loads(analysed.stdout)["verdict"] == "argparse_unrecognized"

    skill = subprocess.run(
        [sys.executable, "-c", blocked + "sys.argv = ['loganalyze', 'mcp', '--skill']; main()"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
        check=False,
    )
    assert skill.returncode == 0 and skill.stdout.startswith("---\nname: loganalyze\n")

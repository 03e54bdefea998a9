"""Several nodes, one story (analyzer/nodes/, issue 38): every fixture of fixtures/multinode/
leads with its root cause and its node, and every consequence points at it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analyzer.core.model import Report
from analyzer.core.toml_data import shipped_toml
from analyzer.formats.html import render_html
from analyzer.formats.json_report import render_json, report_dict
from analyzer.formats.markdown import render_markdown
from analyzer.formats.terminal import render_plain
from analyzer.nodes.node_logs import NodeLog, read_run
from analyzer.nodes.skew import estimate
from analyzer.pipeline import analyze
from tests.fixture_cases import Case, read_sidecar

ROOT = Path(__file__).resolve().parent.parent
CASES = sorted((ROOT / "fixtures" / "multinode").glob("*/case.toml"))
PEER_RULES = {"nccl-watchdog", "nccl-distributed", "child-died", "cuda-error"}


def _case(sidecar: Path) -> tuple[Case, Report]:
    """A folder's case: `[story]` is its expectation, `[multinode]` where it comes from."""
    case = read_sidecar(sidecar, expect="story", fixture="multinode")
    return case, analyze([str(case.input)])


def test_there_are_the_shapes_the_issue_asks_for():
    names = {c.parent.name for c in CASES}
    assert len(names) >= 8
    assert {"oom_then_watchdog", "kernel_oom_kill", "xid_fallen_off_bus", "dist_init_addr_mismatch",
            "kubectl_lws_stream", "four_nodes_illegal_access", "healthy_two_nodes",
            "node0_fails_first"} <= names


@pytest.mark.parametrize("sidecar", CASES, ids=lambda p: p.parent.name)
def test_the_first_incident_is_the_root_cause_and_consequences_point_at_it(sidecar: Path):
    case, report = _case(sidecar)
    story, cited = case.expect, case.fixture
    assert cited["source"] and cited["note"]
    assert report.nodes, "a multi-node run lists its nodes"
    if story["root_rule"] == "none":
        assert not [i for i in report.incidents if i.severity in ("fatal", "error")]
        assert report.verdict == "no incident"
        return
    root = report.incidents[0]
    assert root.rule == story["root_rule"]
    assert root.node == story["root_node"]
    assert root.consequence_of is None
    if "root_flags" in story:
        assert root.offending_flags == story["root_flags"]
    if "root_corrected_contains" in story:
        assert story["root_corrected_contains"] in (root.corrected_command or "")
    consequences = [i for i in report.incidents if i.consequence_of is not None]
    assert consequences and all(i.consequence_of == 0 for i in consequences)
    assert sorted({i.node for i in consequences}) == story["consequence_nodes"]
    assert all(i.node for i in report.incidents)
    lines = "\n".join(s.line for s in report.nodes)
    assert report.nodes[0].name == root.node, "the root cause's node leads"
    assert "the root cause" in report.nodes[0].line
    for text in story.get("summary_contains", []):
        assert text in lines


@pytest.mark.parametrize("sidecar", CASES, ids=lambda p: p.parent.name)
def test_the_json_names_nodes_and_stays_the_same_bytes(sidecar: Path):
    _, report = _case(sidecar)
    _, again = _case(sidecar)
    text = render_json(report)
    assert text == render_json(again)
    data = json.loads(text)
    assert data["schema_version"] == 1
    assert [n["node"] for n in data["nodes"]] == [s.name for s in report.nodes]
    for incident in data["incidents"]:
        assert "node" in incident and "consequence_of" in incident


def test_skew_between_nodes_is_estimated_from_the_shared_startup_lines():
    for sidecar in CASES:
        case, report = _case(sidecar)
        expected = case.expect.get("skew")
        if not expected:
            continue
        story = next(s for s in report.nodes if s.name == expected["node"])
        assert story.skew is not None and story.skew.offset == expected["seconds"]
        assert story.skew.bound is not None and story.skew.bound <= 2


def test_skew_estimate_is_the_median_with_its_spread_as_bound():
    from datetime import datetime

    reference, other = NodeLog("a", "a"), NodeLog("b", "b")
    for event, (a, b) in {"x": (10, 14), "y": (20, 24), "z": (30, 35)}.items():
        reference.sync[event] = datetime(2025, 1, 1, 10, 0, a)
        other.sync[event] = datetime(2025, 1, 1, 10, 0, b)
    skew = estimate([reference, other], reference)["b"]
    assert skew.offset == -4 and skew.bound == 2 and skew.events == 3
    alone = estimate([reference, NodeLog("c", "c")], reference)["c"]
    assert alone.bound is None


def test_a_watchdog_timeout_names_when_its_collective_started():
    _, report = _case(ROOT / "fixtures/multinode/oom_then_watchdog/case.toml")
    line = next(s.line for s in report.nodes if s.name == "node0")
    assert "600 s before" in line and "collective started at 10:04:58" in line


def test_plain_and_markdown_lead_with_the_cause_and_a_line_per_node():
    _, report = _case(ROOT / "fixtures/multinode/four_nodes_illegal_access/case.toml")
    plain = render_plain(report)
    head = plain.splitlines()[1:6]
    assert head[0] == "4 nodes; the root cause is on node2:"
    assert head[1].startswith("  node2: cuda error at") and "the root cause" in head[1]
    assert all("after node2's cuda error" in ln for ln in head[2:])
    assert "node: node0 · consequence of [1]" in plain
    markdown = render_markdown(report)
    assert "#### Nodes: 4 nodes; the root cause is on node2" in markdown
    assert markdown.index("- node2:") < markdown.index("- node0:")


def test_html_lanes_mark_the_cause_and_escape_log_text(tmp_path: Path):
    lines = []
    for pod, rank in (("web-0", 0), ("web-0-1", 1)):
        lines.append(
            f"[pod/{pod}/c] [2025-03-04 10:00:00] server_args=ServerArgs(model_path='/m<script>', "
            f"tp_size=16, nnodes=2, node_rank={rank}, dist_init_addr='10.0.0.1:5000')"
        )
        lines.append(f"[pod/{pod}/c] [2025-03-04 10:00:04 TP{rank * 8}] Init torch distributed ends.")
    lines += [
        "[pod/web-0-1/c] [2025-03-04 10:05:00 TP8] Scheduler hit an exception: Traceback (most recent call last):",
        '[pod/web-0-1/c]   File "/x/sglang/srt/managers/scheduler.py", line 1, in run_scheduler_process',
        "[pod/web-0-1/c] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate <b>2 GiB</b>.",
        "[pod/web-0/c] [rank0]:[E304 10:15:00.1 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600000 milliseconds before timing out.",
    ]
    stream = tmp_path / "pods.log"
    stream.write_text("\n".join(lines) + "\n")
    report = analyze([str(stream)])
    assert [i.node for i in report.incidents[:2]] == ["node1", "node0"]
    page = render_html(report)
    assert page.count('class="lane"') == 2
    assert 'class="mark root"' in page and ">cause</a>" in page
    assert "<b>2 GiB</b>" not in page and "&lt;b&gt;2 GiB&lt;/b&gt;" in page


def _two_nodes(
    tmp_path: Path, second: dict[str, str], version: str = "0.4.3", ready: bool = False
) -> list[str]:
    paths = []
    for rank in (0, 1):
        settings = {"model_path": "'/m'", "tp_size": "16", "nnodes": "2",
                    "dist_init_addr": "'10.0.0.1:5000'"}
        if rank == 1:
            settings.update(second)
        record = ", ".join(f"{k}={v}" for k, v in settings.items())
        text = [
            f"INFO: sglang version {version if rank == 0 else second.get('release', version)}",
            f"[2025-03-04 10:00:00] server_args=ServerArgs({record}, node_rank={rank})",
            f"[2025-03-04 10:00:05 TP{rank * 8}] Init torch distributed begin.",
        ]
        if ready:
            text += [
                f"[2025-03-04 10:00:09 TP{rank * 8}] Init torch distributed ends. mem usage=0.9 GB",
                "[2025-03-04 10:01:00] The server is fired up and ready to roll!",
            ]
        path = tmp_path / f"n{rank}.log"
        path.write_text("\n".join(text) + "\n")
        paths.append(str(path))
    return paths


@pytest.mark.parametrize(
    ("second", "flag"),
    [({"tp_size": "8"}, "--tp-size"), ({"nnodes": "3"}, "--nnodes"),
     ({"model_path": "'/other'"}, "--model-path")],
)
def test_a_flag_the_nodes_disagree_on_is_the_root_cause(tmp_path: Path, second, flag):
    report = analyze(_two_nodes(tmp_path, second))
    root = report.incidents[0]
    assert root.rule == "multinode-flag-mismatch" and root.node == "node1"
    assert root.offending_flags == [flag]


def test_a_release_the_nodes_disagree_on_is_the_root_cause(tmp_path: Path):
    report = analyze(_two_nodes(tmp_path, {"release": "0.4.1"}))
    root = report.incidents[0]
    assert root.rule == "multinode-flag-mismatch" and "release 0.4.1" in root.title


def test_two_nodes_with_one_node_rank(tmp_path: Path):
    paths = _two_nodes(tmp_path, {})
    text = Path(paths[1]).read_text().replace("node_rank=1", "node_rank=0")
    Path(paths[1]).write_text(text)
    root = analyze(paths).incidents[0]
    assert root.offending_flags == ["--node-rank"]


def test_agreeing_nodes_give_no_incident(tmp_path: Path):
    report = analyze(_two_nodes(tmp_path, {}, ready=True))
    assert report.incidents == [] and len(report.nodes) == 2


def test_single_node_logs_together_are_not_joined():
    """Two single-node logs (nnodes 1) analysed at once keep the report they had."""
    real = sorted((ROOT / "fixtures" / "real").glob("*.log"))[:2]
    report = analyze([str(p) for p in real])
    assert report.nodes == []
    data = report_dict(report)
    assert "nodes" not in data
    assert all("node" not in i and "consequence_of" not in i for i in data["incidents"])


def test_kernel_lines_are_read_in_their_shapes(tmp_path: Path):
    from analyzer.core.read import open_inputs

    path = tmp_path / "k.txt"
    path.write_text(
        "Dec 05 10:05:20 host-b kernel: Memory cgroup out of memory: Killed process 77 (python3) total-vm:1kB\n"
        "[Sat Dec  5 10:05:21 2026] Out of memory: Kill process 78 (python) score 900 or sacrifice child\n"
        "[  812.1] oom_reaper: reaped process 77 (python3), now anon-rss:0kB\n"
        "[  812.2] NVRM: Xid (PCI:0000:3b:00): 48, pid=78, name=python, An uncorrectable double bit error\n"
    )
    run = read_run(open_inputs([str(path)]), {})
    kinds = [(k.kind, k.pid, k.host, k.code) for k in run.kernel]
    assert kinds == [("oom_kill", "77", "host-b", None), ("oom_kill", "78", None, None),
                     ("xid", "78", None, 48)]
    assert run.kernel[0].time is not None and run.kernel[0].time.strftime("%H:%M:%S") == "10:05:20"
    assert run.kernel[2].time is None  # seconds since boot: no clock


def test_the_xid_table_has_the_well_known_codes_with_a_meaning():
    table = shipped_toml("analyzer.nodes", "xid.toml")
    for code in (13, 31, 43, 45, 48, 61, 62, 63, 64, 74, 79, 92, 94, 95):
        assert table[str(code)]["meaning"]
        assert isinstance(table[str(code)]["fatal"], bool)


def test_a_non_fatal_xid_is_no_root_cause(tmp_path: Path):
    paths = _two_nodes(tmp_path, {}, ready=True)
    kernel = tmp_path / "n1-kernel.txt"
    kernel.write_text("Mar 04 10:00:03 n1 kernel: NVRM: Xid (PCI:0000:3b:00): 63, pid=1, Row Remapper\n")
    report = analyze([*paths, str(kernel)])
    assert [(i.severity, i.rule) for i in report.incidents] == [("warning", "nvidia-xid")]
    assert report.incidents[0].node == "node1"  # the file is named for it (n1-kernel.txt)


def test_a_difference_the_nodes_came_up_with_is_a_warning(tmp_path: Path):
    """One model under two paths, nodes that both got through init and served: no cause."""
    paths = _two_nodes(tmp_path, {"model_path": "'/mnt/m'", "dist_init_addr": "'head:5000'"},
                       ready=True)
    report = analyze(paths)
    assert [(i.rule, i.severity, i.offending_flags) for i in report.incidents] == [
        ("multinode-flag-mismatch", "warning", ["--model-path"])
    ]
    assert not any(i.severity == "fatal" for i in report.incidents)


def test_a_date_no_calendar_has_is_no_traceback(tmp_path: Path):
    paths = _two_nodes(tmp_path, {}, ready=True)
    with open(paths[1], "a") as log:
        log.write("[2025-13-45 10:00:00 TP8] Load weight begin.\n2025-02-30T10:00:00Z x\n")
    assert analyze(paths).nodes


def test_logs_without_a_record_are_nodes_when_their_ranks_split_one_world(tmp_path: Path):
    node0 = tmp_path / "a.log"
    node1 = tmp_path / "b.log"
    node0.write_text(
        "[2025-03-04 10:00:00 TP0] Load weight begin. avail mem=70 GB\n"
        "[rank0]:[E0304 10:15:00.1 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught collective "
        "operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, NumelOut=1, "
        "Timeout(ms)=600000) ran for 600000 milliseconds before timing out.\n"
    )
    node1.write_text(
        "[2025-03-04 10:00:00 TP1] Load weight begin. avail mem=70 GB\n"
        "[2025-03-04 10:05:00 TP1] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/x/sglang/srt/managers/scheduler.py", line 1, in run_scheduler_process\n'
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.\n"
    )
    report = analyze([str(node0), str(node1)])
    assert [(i.rule, i.node, i.consequence_of) for i in report.incidents] == [
        ("oom", "b", None), ("nccl-watchdog", "a", 0)
    ]


def test_docker_compose_prefixes_are_peeled_before_the_clocks(tmp_path: Path):
    """`docker compose logs` puts `NAME  | ` before each line (engine/normalize.py's forms)."""
    for rank, name in ((0, "head"), (1, "worker")):
        lines = [
            f"[2025-03-04 10:00:00] server_args=ServerArgs(model_path='/m', tp_size=16, "
            f"nnodes=2, node_rank={rank}, dist_init_addr='10.0.0.1:5000')",
            f"[2025-03-04 10:00:04 TP{rank * 8}] Init torch distributed ends. mem usage=1 GB",
        ]
        if rank:
            lines += [
                "[2025-03-04 10:05:00 TP8] Scheduler hit an exception: Traceback (most recent call last):",
                '  File "/x/sglang/srt/managers/scheduler.py", line 1, in run_scheduler_process',
                "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.",
            ]
        else:
            lines.append(
                "[rank0]:[E0304 10:15:00.1 ProcessGroupNCCL.cpp:616] [Rank 0] Watchdog caught "
                "collective operation timeout: WorkNCCL(SeqNum=9, OpType=ALLREDUCE, NumelIn=1, "
                "NumelOut=1, Timeout(ms)=600000) ran for 600000 milliseconds before timing out."
            )
        text = "".join(f"{name}-1  | {line}\n" for line in lines)
        (tmp_path / f"{name}.log").write_text(text)
    report = analyze([str(tmp_path)])
    assert report.nodes[1].line.startswith(
        "node0: NCCL watchdog timeout at 10:15:00, 600 s after node1's CUDA out of memory at 10:05:00"
    )


def _serving_pair(tmp_path: Path) -> list[Path]:
    paths = []
    for rank in (0, 1):
        path = tmp_path / f"host{'ab'[rank]}.log"
        path.write_text(
            f"[2025-03-04 10:00:00] server_args=ServerArgs(model_path='/m', tp_size=16, "
            f"nnodes=2, node_rank={rank}, dist_init_addr='10.0.0.1:5000')\n"
            f"[2025-03-04 10:00:04 TP{rank * 8}] Init torch distributed ends. mem usage=1 GB\n"
        )
        paths.append(path)
    return paths


def test_a_kernel_line_nothing_ties_goes_to_the_node_that_died(tmp_path: Path):
    node0, node1 = _serving_pair(tmp_path)
    with node1.open("a") as log:
        log.write("[2025-03-04 10:05:00] Scheduler or DataParallelController 777 terminated with -9\n")
    with node0.open("a") as log:
        log.write(
            "[2025-03-04 10:06:00 TP0] Scheduler watchdog timeout "
            "(self.watchdog_timeout=300, self.soft=False)\n"
        )
    (tmp_path / "dmesg.txt").write_text(
        "[ 99.1] Out of memory: Killed process 4321 (python3) total-vm:1kB, anon-rss:1kB\n"
    )
    report = analyze([str(tmp_path)])
    assert [(i.rule, i.node, i.consequence_of) for i in report.incidents] == [
        ("kernel-oom-kill", "node1", None),
        ("watchdog-timeout", "node0", 0),
        ("child-died", "node1", 0),
    ]
    line = next(s.line for s in report.nodes if s.name == "node0")
    assert "wait started at 10:01:00, 300 s before" in line


def test_another_process_killed_beside_a_healthy_run_is_a_warning(tmp_path: Path):
    node0, node1 = _serving_pair(tmp_path)
    (tmp_path / "hostb-dmesg.txt").write_text(
        "[ 99.1] Out of memory: Killed process 4321 (java) total-vm:1kB, anon-rss:1kB\n"
    )
    report = analyze([str(tmp_path)])
    assert [(i.rule, i.severity, i.node) for i in report.incidents] == [
        ("kernel-oom-kill", "warning", "node1")
    ]
    with node1.open("a") as log:
        log.write("[2025-03-04 10:00:05 TP8] Process 4321 gpu_id 0 is running on CPUs: [0, 1]\n")
    assert analyze([str(tmp_path)]).incidents[0].severity == "fatal"  # it was node1's rank


def test_an_input_gone_before_the_join_leaves_the_report_with_a_note(monkeypatch):
    import analyzer.nodes.story as story

    def gone(*args, **kwargs):
        raise FileNotFoundError("node1.log vanished")

    folder = ROOT / "fixtures/multinode/oom_then_watchdog"
    plain = analyze([str(folder)])
    monkeypatch.setattr(story, "read_run", gone)
    report = analyze([str(folder)])
    assert report.nodes == [] and all(i.node is None for i in report.incidents)
    assert report.warnings[-1] == "the nodes were not joined: node1.log vanished"
    assert {i.rule for i in report.incidents} == {i.rule for i in plain.incidents}

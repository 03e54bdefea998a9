"""The findings the multi-node join (analyzer/nodes/) adds: its entries of the registry of
everything the tool can report (finding_registry.py), kept beside the registry since the join
stands above it: id, class, severity, priority, title and doc."""

from __future__ import annotations

from analyzer.rulebook.vocabulary import RuleDoc

# (id, class, severity, priority, title, doc); the join orders them itself (cause first)
NODE_ENTRIES = (
    (
        "kernel-oom-kill",
        "host_oom",
        "fatal",
        None,
        "The kernel's OOM killer killed a process: the host ran out of memory",
        RuleDoc(
            "A dmesg or journal line of the kernel's OOM killer beside a node's log, tied to "
            "the node by the pid its log named, its host or its file.",
            "The host, not the GPU, ran out of memory; the node's ranks die without an error "
            "of their own and the other nodes time out waiting for them.",
            "Give the node more host memory or load less into it (fewer CPU-side buffers, "
            "no CPU offload); the other nodes' timeouts follow from it.",
        ),
    ),
    (
        "nvidia-xid",
        "gpu_fault",
        "fatal",
        None,
        "An NVIDIA Xid: the driver reported a GPU fault",
        RuleDoc(
            "An `NVRM: Xid` line beside a node's log, its code read through "
            "analyzer/nodes/xid.toml (NVIDIA's Xid catalog).",
            "A GPU fault on one node stops its ranks; the others wait in a collective.",
            "Follow the code's advice (reset or drain the GPU, check the hardware); codes "
            "45, 63 and 92 are warnings.",
        ),
    ),
    (
        "multinode-flag-mismatch",
        "node_mismatch",
        "fatal",
        None,
        "A setting that must agree across nodes differs on one node",
        RuleDoc(
            "--nnodes, --dist-init-addr, --tp-size, the model path, the release or a repeated "
            "--node-rank that differs between the nodes' commands or server_args records.",
            "The nodes cannot form one group: distributed init hangs or fails on every node.",
            "Launch the node that differs with the others' value (its corrected command).",
        ),
    ),
    (
        "node-stopped-printing",
        "silent_death",
        "fatal",
        None,
        "A node stopped printing before the others' collectives timed out",
        RuleDoc(
            "A node whose log ends, with no error, before the other nodes' watchdog or "
            "socket timeouts began.",
            "The silent node is the one that failed: the others only waited for it.",
            "Collect that node's kernel log (dmesg, journalctl -k) and its exit status.",
        ),
    ),
)

"""Write fixtures/multinode/: each case a folder of node logs and its case.toml.

    python scripts/generate_multinode_fixtures.py [REPO]   # REPO defaults to this checkout

The lines follow the messages as SGLang 0.4.x (model_runner.py, scheduler.py, engine.py),
torch (ProcessGroupNCCL.cpp, TCPStore, gloo pair.cc), the kernel (mm/oom_kill.c) and the
NVIDIA driver write them; each case.toml cites the public thread whose shape it follows.
"""

import sys
from pathlib import Path

REPO = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent
ROOT = REPO / "fixtures" / "multinode"
MODEL = "/models/DeepSeek-V3"


def args(rank, nnodes=2, tp=16, addr="10.0.0.1:5000", model=MODEL):
    return (f"server_args=ServerArgs(model_path='{model}', tokenizer_path='{model}', "
            f"trust_remote_code=True, dtype='auto', mem_fraction_static=0.85, tp_size={tp}, "
            f"dp_size=1, dist_init_addr='{addr}', nnodes={nnodes}, node_rank={rank}, "
            f"host='0.0.0.0', port=30000, watchdog_timeout=300, dist_timeout=None)")


def launch(rank, nnodes=2, tp=16, addr="10.0.0.1:5000", model=MODEL):
    return (f"$ python3 -m sglang.launch_server --model-path {model} --tp-size {tp} --nnodes {nnodes} "
            f"--node-rank {rank} --dist-init-addr {addr} --trust-remote-code --host 0.0.0.0 --port 30000")


def startup(rank, per_node=8, day="2025-03-04", t0=(10, 0, 0), skew=0, nnodes=2, tp=16,
            addr="10.0.0.1:5000", model=MODEL, version="0.4.3.post2", upto="ready"):
    """A node's startup lines; `skew` seconds added to its clock."""
    h, m, s = t0
    base = h * 3600 + m * 60 + s + skew

    def ts(off):
        t = base + off
        return f"{day} {t // 3600:02d}:{t % 3600 // 60:02d}:{t % 60:02d}"
    ranks = range(rank * per_node, rank * per_node + per_node)
    out = [launch(rank, nnodes, tp, addr, model),
           f"INFO: sglang version {version}" if version else None,
           f"[{ts(0)}] {args(rank, nnodes, tp, addr, model)}"]
    out += [f"[{ts(4)} TP{r}] Init torch distributed begin." for r in ranks]
    out += [f"[{ts(19)} TP{r}] Init torch distributed ends. mem usage=0.91 GB" for r in ranks]
    if upto == "init":
        return [x for x in out if x], ts
    out += [f"[{ts(20)} TP{r}] Load weight begin. avail mem=78.38 GB" for r in ranks]
    out += [f"[{ts(140)} TP{r}] Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=37.21 GB" for r in ranks]
    out += [f"[{ts(150)} TP{r}] Capture cuda graph begin. This can take up to several minutes. avail mem=30.02 GB" for r in ranks]
    out += [f"[{ts(190)} TP{r}] Capture cuda graph end. Time elapsed: 40.12 s" for r in ranks]
    if rank == 0:
        out += [f"[{ts(196)}] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
                f"[{ts(200)}] The server is fired up and ready to roll!"]
    return [x for x in out if x], ts


def oom_traceback(ts, off, r):
    return [
        f"[{ts(off)} TP{r}] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/scheduler.py", line 1796, in run_scheduler_process',
        "    scheduler.event_loop_overlap()",
        '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/model_executor/model_runner.py", line 785, in forward_extend',
        "    return self.model.forward(",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 1 has a total capacity of 79.11 GiB of which 1.20 GiB is free. Process 4242 has 77.90 GiB memory in use.",
        "",
    ]


def watchdog(ts, off, rank, ms=600000, seq=151721, ran=600049):
    t = ts(off)
    mmdd = t[5:7] + t[8:10]
    hms = t[11:]
    return [
        f"[rank{rank}]:[E{mmdd} {hms}.122900428 ProcessGroupNCCL.cpp:616] [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=58720256, NumelOut=58720256, Timeout(ms)={ms}) ran for {ran} milliseconds before timing out.",
        f"[rank{rank}]:[E{mmdd} {hms}.123659968 ProcessGroupNCCL.cpp:1785] [PG ID 2 PG GUID 3 Rank {rank}] Exception (either an error or timeout) detected by watchdog at work: {seq}, last enqueued NCCL work: {seq}, last completed NCCL work: {seq - 1}.",
        f"[rank{rank}]:[E{mmdd} {hms}.124100001 ProcessGroupNCCL.cpp:630] [Rank {rank}] Some NCCL operations have failed or timed out. Due to the asynchronous nature of CUDA kernels, subsequent GPU operations might run on corrupted/incomplete data.",
        "terminate called after throwing an instance of 'c10::DistBackendError'",
        f"  what():  [PG ID 2 PG GUID 3 Rank {rank}] Process group watchdog thread terminated with exception: [Rank {rank}] Watchdog caught collective operation timeout: WorkNCCL(SeqNum={seq}, OpType=ALLREDUCE, NumelIn=58720256, NumelOut=58720256, Timeout(ms)={ms}) ran for {ran} milliseconds before timing out.",
        f"[{ts(off + 1)}] Received sigquit from a child process. It usually means the child failed.",
    ]


def serving(ts, start, end, step=20, tp0=0):
    return [f"[{ts(o)} DP0 TP{tp0}] Decode batch. #running-req: 12, #token: 5120, token usage: 0.04, gen throughput (token/s): 310.22, #queue-req: 0"
            for o in range(start, end, step)]


def write(case, files, toml):
    folder = ROOT / case
    folder.mkdir(parents=True, exist_ok=True)
    for name, lines in files.items():
        (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (folder / "case.toml").write_text(toml.strip() + "\n", encoding="utf-8")


# 1. OOM on node1 while serving; node0's ranks time out 600 s later.
n0, ts0 = startup(0, skew=0)
n1, ts1 = startup(1, skew=3)  # node1's clock runs 3 s ahead
n0 += serving(ts0, 210, 300) + watchdog(ts0, 300 + 600 - 3 + 1, 0)
n1 += serving(ts1, 210, 300, tp0=8) + oom_traceback(ts1, 300, 9)
write("oom_then_watchdog", {"node0.log": n0, "node1.log": n1}, """
[multinode]
source = "sgl-project/sglang#3099"
also = ["sgl-project/sglang#3932"]
note = "Two H800 nodes serving DeepSeek-V3 with --tp-size 16 --nnodes 2 (the launch of #3099); node1's TP9 runs out of GPU memory while serving, node0's ranks report torch's NCCL watchdog timeout 600 s later (the Timeout(ms)=600000 of #3932's log). node1's clock runs 3 s ahead of node0's: the shared startup lines show it."
[story]
root_rule = "oom"
root_node = "node1"
consequence_nodes = ["node0"]
skew = { node = "node1", seconds = -3 }
summary_contains = ["node0: NCCL watchdog timeout", "after node1's"]
""")

# 2. The kernel's OOM killer kills node1's scheduler (pid 5132); dmesg beside the logs.
n0, ts0 = startup(0)
n1, ts1 = startup(1)
n1 = n1[:3] + [f"[{ts1(3)} TP{r}] Process {5128 + r - 8} gpu_id {r - 8} is running on CPUs: [{(r - 8) * 8}, {(r - 8) * 8 + 1}]" for r in range(8, 16)] + n1[3:]
n0 += serving(ts0, 210, 400) + watchdog(ts0, 420 + 600, 0)
n1 += serving(ts1, 210, 420, tp0=8) + [f"[{ts1(421)}] Scheduler or DataParallelController 5132 terminated with -9"]
dmesg = [
    "[812345.120331] python3 invoked oom-killer: gfp_mask=0x140cca(GFP_HIGHUSER_MOVABLE|__GFP_COMP), order=0, oom_score_adj=0",
    "[812345.120410] Mem-Info:",
    "[812345.121802] oom-kill:constraint=CONSTRAINT_NONE,nodemask=(null),cpuset=/,mems_allowed=0-1,global_oom,task_memcg=/,task=python3,pid=5132,uid=0",
    "[812345.121840] Out of memory: Killed process 5132 (python3) total-vm:412233164kB, anon-rss:1981232100kB, file-rss:102400kB, shmem-rss:0kB, UID:0 pgtables:4012kB oom_score_adj:0",
    "[812345.402117] oom_reaper: reaped process 5132 (python3), now anon-rss:0kB, file-rss:0kB, shmem-rss:0kB",
]
write("kernel_oom_kill", {"node0.log": n0, "node1.log": n1, "node1-dmesg.txt": dmesg}, """
[multinode]
source = "sgl-project/sglang#3099"
also = ["pytorch/pytorch#52848"]
note = "Two nodes as in #3099; the Linux OOM killer (mm/oom_kill.c message shapes) kills node1's TP12 scheduler, pid 5132, which node1's log named at startup (utils `Process PID gpu_id N is running on CPUs`); node1's parent then logs engine.py's `Scheduler or DataParallelController PID terminated with -9` and node0 times out in the watchdog. dmesg counts seconds since boot: the kill is placed at node1's death."
[story]
root_rule = "kernel-oom-kill"
root_node = "node1"
consequence_nodes = ["node0", "node1"]
summary_contains = ["node0: NCCL watchdog timeout"]
""")

# 3. An Xid 79 on node1 (journalctl -k), node1's ranks then see CUDA errors, node0 times out.
n0, ts0 = startup(0)
n1, ts1 = startup(1)
n0 += serving(ts0, 210, 500) + watchdog(ts0, 500 + 600, 0)
n1 += serving(ts1, 210, 500, tp0=8) + [
    f"[{ts1(501)} TP11] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/scheduler.py", line 1796, in run_scheduler_process',
    "    scheduler.event_loop_overlap()",
    "RuntimeError: CUDA error: unspecified launch failure",
    "CUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below might be incorrect.",
    f"[{ts1(502)}] Received sigquit from a child process. It usually means the child failed.",
]
journal = [
    "Mar 04 10:08:19 gpu-b kernel: NVRM: GPU at PCI:0000:3b:00: GPU-6f2a1c33-0b4e-4d7a-9c1e-2b5d8e7f9a10",
    "Mar 04 10:08:20 gpu-b kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    "Mar 04 10:08:20 gpu-b kernel: NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.",
]
write("xid_fallen_off_bus", {"gpu-a.log": n0, "gpu-b.log": n1, "gpu-b-kernel.txt": journal}, """
[multinode]
source = "sgl-project/sglang#3836"
also = ["NVIDIA/open-gpu-kernel-modules#1151"]
note = "Two H100x8 nodes as in #3836 (hosts named gpu-a and gpu-b); the driver logs Xid 79 (journalctl -k, the line shape of open-gpu-kernel-modules#1151) on gpu-b one second before its TP11 sees `CUDA error: unspecified launch failure`; gpu-a (node0) times out in the NCCL watchdog 600 s later."
[story]
root_rule = "nvidia-xid"
root_node = "node1"
consequence_nodes = ["node0", "node1"]
summary_contains = ["node0: NCCL watchdog timeout"]
""")

# 4. node1 given another --dist-init-addr: both wait at distributed init and time out.
n0, ts0 = startup(0, upto="init")
n0 = n0[:3] + [ln for ln in n0[3:] if "begin" in ln]
n1, ts1 = startup(1, addr="10.0.0.2:5000", upto="init")
n1 = n1[:3] + [ln for ln in n1[3:] if "begin" in ln]
n1 += [
    f"[{ts1(1804)} TP8] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/distributed/parallel_state.py", line 1048, in init_distributed_environment',
    "    torch.distributed.init_process_group(",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/rendezvous.py", line 189, in _create_c10d_store',
    "    return TCPStore(",
    "torch.distributed.DistNetworkError: The client socket has timed out after 1800000ms while trying to connect to (10.0.0.2, 5000).",
    f"[{ts1(1805)}] Received sigquit from a child process. It usually means the child failed.",
]
n0 += [
    f"[{ts0(1805)} TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/distributed/parallel_state.py", line 1048, in init_distributed_environment',
    "    torch.distributed.init_process_group(",
    "torch.distributed.DistStoreError: Timed out after 1801 seconds waiting for clients. 8/16 clients joined.",
    f"[{ts0(1806)}] Received sigquit from a child process. It usually means the child failed.",
]
write("dist_init_addr_mismatch", {"node0.log": n0, "node1.log": n1}, """
[multinode]
source = "pytorch/pytorch#52848"
also = ["sgl-project/sglang#3099"]
note = "Two nodes launched as in #3099, node1 with another --dist-init-addr: node0's store waits for the clients that never join (torch's TCPStore `Timed out after N seconds waiting for clients. J/W clients joined.`), node1's client socket times out connecting to an address nobody serves; the hang at init of pytorch#52848."
[story]
root_rule = "multinode-flag-mismatch"
root_node = "node1"
root_flags = ["--dist-init-addr"]
root_corrected_contains = "--node-rank 1 --dist-init-addr 10.0.0.1:5000 --trust-remote-code"
consequence_nodes = ["node0", "node1"]
""")

# 5. A kubectl combined stream of a LeaderWorkerSet group: the worker pod dies of CUDA OOM.
lead, tsl = startup(0)
work, tsw = startup(1)
lead += serving(tsl, 210, 300) + watchdog(tsl, 301 + 600, 0)
work += serving(tsw, 210, 300, tp0=8) + oom_traceback(tsw, 301, 8)
stream = []
lead = [ln for ln in lead if not ln.startswith("$")]
work = [ln for ln in work if not ln.startswith("$")]
for i in range(max(len(lead), len(work))):
    if i < len(lead):
        stream.append(f"[pod/sglang-0/sglang-leader] {lead[i]}")
    if i < len(work):
        stream.append(f"[pod/sglang-0-1/sglang-worker] {work[i]}")
write("kubectl_lws_stream", {"stream.log": stream}, """
[multinode]
source = "sgl-project/sglang#3932"
also = ["sgl-project/sglang#3099"]
note = "`kubectl logs -l leaderworkerset.sigs.k8s.io/name=sglang --prefix` of a two-pod LeaderWorkerSet group (the k8s pods of #3099): the worker pod (node_rank 1) runs out of GPU memory, the leader times out in torch's NCCL watchdog 600 s later (#3932's message)."
[story]
root_rule = "oom"
root_node = "node1"
consequence_nodes = ["node0"]
""")

# 6. Four nodes (tp 32): node2 hits an illegal memory access; the others time out.
files = {}
for rank in range(4):
    lines, ts = startup(rank, nnodes=4, tp=32)
    lines += serving(ts, 210, 400, tp0=rank * 8)
    if rank == 2:
        lines += [
            f"[{ts(402)} TP19] Scheduler hit an exception: Traceback (most recent call last):",
            '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/scheduler.py", line 1796, in run_scheduler_process',
            "    scheduler.event_loop_overlap()",
            "RuntimeError: CUDA error: an illegal memory access was encountered",
            f"[{ts(403)}] Received sigquit from a child process. It usually means the child failed.",
        ]
    else:
        lines += watchdog(ts, 402 + 600 + rank, rank * 8)
    files[f"node{rank}.log"] = lines
write("four_nodes_illegal_access", files, """
[multinode]
source = "sgl-project/sglang#3784"
note = "DeepSeek-R1 on four A100x8 nodes as in #3784 (tp 32); node2's TP19 hits an illegal memory access while serving, nodes 0, 1 and 3 report the NCCL watchdog timeout 600 s later."
[story]
root_rule = "cuda-error"
root_node = "node2"
consequence_nodes = ["node0", "node1", "node3"]
""")

# 7. A healthy two-node run.
n0, ts0 = startup(0)
n1, ts1 = startup(1, skew=-2)
n0 += serving(ts0, 210, 600)
n1 += serving(ts1, 210, 600, tp0=8)
write("healthy_two_nodes", {"node0.log": n0, "node1.log": n1}, """
[multinode]
source = "sgl-project/sglang#3099"
note = "The two-node launch of #3099 coming up and serving, no failure: node1's clock 2 s behind."
[story]
root_rule = "none"
skew = { node = "node1", seconds = 2 }
""")

# 8. node0 fails first (CUDA OOM in prefill); node1's ranks lose gloo and time out.
n0, ts0 = startup(0)
n1, ts1 = startup(1)
n0 += serving(ts0, 210, 300) + oom_traceback(ts0, 300, 3) + [
    f"[{ts0(301)}] Received sigquit from a child process. It usually means the child failed."]
n1 += serving(ts1, 210, 300, tp0=8) + [
    f"[{ts1(302)} TP12] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/scheduler.py", line 1002, in recv_requests',
    "    recv_reqs = broadcast_pyobj(",
    '  File "/usr/local/lib/python3.10/dist-packages/torch/distributed/distributed_c10d.py", line 2417, in broadcast',
    "    work.wait()",
    "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by peer [10.0.0.1]:40001",
    f"[{ts1(303)}] Received sigquit from a child process. It usually means the child failed.",
]
write("node0_fails_first", {"node0.log": n0, "node1.log": n1}, """
[multinode]
source = "sgl-project/sglang#3099"
also = ["sgl-project/sglang#3932"]
note = "The failing node is node 0: its TP3 runs out of GPU memory; node1's ranks, blocked in the scheduler's broadcast of requests over gloo (scheduler.py recv_requests -> broadcast_pyobj), get `Connection closed by peer` from node0's address two seconds later."
[story]
root_rule = "oom"
root_node = "node0"
consequence_nodes = ["node1"]
summary_contains = ["node1: distributed error"]
""")

# 9. node1 stops printing (a hang, or killed with nothing logged); node0 times out.
n0, ts0 = startup(0)
n1, ts1 = startup(1)
n0 += serving(ts0, 210, 600) + watchdog(ts0, 610 + 600, 0)
n1 += serving(ts1, 210, 610, tp0=8)
write("silent_node", {"node0.log": n0, "node1.log": n1}, """
[multinode]
source = "sgl-project/sglang#3836"
note = "The hang of #3836: node1's log just ends while serving (no error), node0's ranks time out in the NCCL watchdog 600 s after node1's last line."
[story]
root_rule = "node-stopped-printing"
root_node = "node1"
consequence_nodes = ["node0"]
""")

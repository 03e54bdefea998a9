"""One clock for all nodes: each node's offset from the reference node, and its bound.

Every node logs the same startup stages (model_runner.py: `Init torch distributed begin` /
`ends`, `Load weight begin` / `end`; cuda_graph_setup.py: `Capture ... CUDA graph begin` /
`end`). The distributed init ends at a barrier, and the stages after it run in step, so
the differences of those timestamps between two nodes estimate their clocks' skew: the
median is the estimate, the spread around it (plus the logs' one-second resolution) the
bound.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from statistics import median

from analyzer.nodes.node_logs import NodeLog

RESOLUTION = 1.0  # SGLang's timestamps are whole seconds


@dataclass(frozen=True)
class Skew:
    """Add `offset` seconds to a node's times to read them on the reference clock."""

    offset: float
    bound: float | None  # None: no shared event, the offset (0) is not estimated
    events: int


def estimate(nodes: list[NodeLog], reference: NodeLog) -> dict[str, Skew]:
    """Each node's skew against the reference node, by stream key."""
    skews: dict[str, Skew] = {}
    for node in nodes:
        if node is reference:
            skews[node.key] = Skew(0.0, 0.0, len(node.sync))
            continue
        shared = [event for event in node.sync if event in reference.sync]
        diffs = [(reference.sync[e] - node.sync[e]).total_seconds() for e in shared]
        if not diffs:
            skews[node.key] = Skew(0.0, None, 0)
            continue
        offset = float(median(diffs))
        spread = max(abs(d - offset) for d in diffs)
        skews[node.key] = Skew(offset, spread + RESOLUTION, len(diffs))
    return skews


def on_reference(time: datetime | None, skew: Skew | None) -> datetime | None:
    if time is None or skew is None:
        return time
    return time + timedelta(seconds=skew.offset)

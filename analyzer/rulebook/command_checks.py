"""Launch-command checks: settings SGLang reinterprets without printing a word.

SGLang 0.5.23 accepts these and runs something other than what the command seems to say:
a shortened flag argparse expanded (`--tp`, `--speculative-num-draft-token`), `--dp 8`
(eight replicas, not attention DP), `--context-length 128k` (128000), `--enable-dp-attention`
without `--dp-size` (attention DP stays off), `--mem-fraction-static 85`, a lowercase
algorithm, an EAGLE-3 draft served as EAGLE (no crash, accept length stuck near 1.00), and
speculative settings left to SGLang's own choice. They are found from the command, the
`server_args` record and the decode lines, so they also work before a launch (log None).

Each finding is a warning with a synthetic Match whose evidence lines are real: the
launch-command line (number 0 when the command did not come from the log), the
`server_args` line, a `Load weight end` line, decode lines. The edits travel in the
Finding; the check rules below name `apply_check_edits`, so the corrected command is
applied and validated on the same path as every rule's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from analyzer.core.model import Finding, ScannedLog
from analyzer.rulebook.check_rules import CheckInputs, launch_line
from analyzer.rulebook.checks_speculative import (
    check_auto_params,
    check_draft_algorithm,
    check_draft_tokens,
)
from analyzer.rulebook.checks_typed import (
    check_algorithm_case,
    check_dp_attention,
    check_dp_prefix,
    check_mem_fraction,
    check_prefixes,
    check_size_suffixes,
)
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.launch_command import LaunchCommand

CHECKS: tuple[Callable[[CheckInputs], list[Finding]], ...] = (
    check_prefixes,
    check_dp_prefix,
    check_size_suffixes,
    check_dp_attention,
    check_mem_fraction,
    check_algorithm_case,
    check_draft_tokens,
    check_draft_algorithm,
    check_auto_params,
)


def check_command(
    command: LaunchCommand,
    catalog: FlagCatalog,
    server_args: dict[str, Any] | None,
    log: ScannedLog | None,
) -> list[Finding]:
    """Every silent reinterpretation of this launch, as warnings (empty when none)."""
    inputs = CheckInputs(command, catalog, server_args, log, launch_line(command, log, catalog))
    findings: list[Finding] = []
    for check in CHECKS:
        findings.extend(check(inputs))
    return findings

"""A failure signal no rule explained becomes an incident: never a silent "all clear".

The incident is of the class its catalog entry gives (a CUDA runtime string, an NCCL error,
a linker message...) or of the SGLang raise site whose message the line holds, else
`unknown`; it cites the signal's line, the startup phase the log had reached, and the next
evidence to collect.
"""

from __future__ import annotations

from collections.abc import Callable

from analyzer.core.model import FailureSignal, Incident, Line, ScannedLog, Traceback
from analyzer.signals.failure_lines import catalog_entries

UNNAMED = ("error", "level", "client")  # kinds whose line may hold an SGLang message
MAX_WRAPPERS = 3  # `prefix: Type: message` layers tried for an SGLang message
MIN_MESSAGE = 24  # shorter texts fit too many of SGLang's messages
# the signal that best tells the failure first; within a kind, the first line
KIND_ORDER = ("catalog", "device_assert", "death", "argparse", "cuda", "nccl", "error", "traceback",
              "level", "client")  # fmt: skip
KIND_TITLES = {
    "device_assert": ("cuda_error", "A CUDA kernel's device-side assertion failed"),
    "death": ("silent_death", "A process died"),
    "argparse": ("argparse_invalid", "The command line was refused"),
    "cuda": ("cuda_error", "A CUDA error"),
    "nccl": ("nccl_distributed", "An NCCL error"),
    "error": ("unknown", "An error no rule recognises"),
    "level": ("unknown", "An error line no rule recognises"),
    "traceback": ("unknown", "A Python traceback cut before its exception"),
    "client": ("client_error", "A client's request to the server failed"),
    "usage": ("argparse_invalid", "SGLang printed its usage: it refused the command"),
}
NEXT_EVIDENCE = {
    "death": "Collect the lines before the death (dmesg / `journalctl -k` for the OOM killer,"
    " the container's exit reason) and the launch command.",
    "usage": "Collect the whole output down to argparse's `error:` line under the usage text:"
    " it names the argument SGLang refused.",
    "argparse": "Compare the command with `python -m sglang.launch_server --help` of the"
    " installed release.",
    "traceback": "Collect the lines after the traceback's header down to its exception line:"
    " the exception names the failure.",
}
DEFAULT_NEXT = (
    "Collect the full log from the launch command to this line (the traceback above it, if"
    " any), the launch command and `python -m sglang.check_env`."
)
ADVICE_KIND = {
    "device_assert": "Rerun with CUDA_LAUNCH_BLOCKING=1 to find the kernel; an index beyond"
    " a table (vocabulary, positions) is the usual cause: check the model's config against"
    " its weights.",
}


def unexplained_signal(
    log: ScannedLog,
    incidents: list[Incident],
    release: str | None,
    classified: Callable[[], Incident | None],
    notices: list[Incident] | None = None,
) -> list[Incident]:
    """The incident for the most telling signal the `incidents` (warnings, client findings
    and, with `notices`, a death or stall notice) leave unexplained. An SGLang raise site's
    message shown without its traceback is added to the log as that traceback and
    `classified` as any would be."""
    from analyzer.blame.raise_sites import error_catalog_for

    # a notice (a death, a stall) cites the lines around where the log ends: no explanation
    notices = notices or []
    explained = {(ln.number, ln.text) for i in incidents if i not in notices for ln in i.evidence}
    clients = any(i.rule_class == "client_error" and i.severity == "info" for i in incidents)
    # beside a client's failure or a notice only a message that names the failure tells more
    named_only = clients or bool(notices)
    # a client's failure relays the server's (an error body's CUDA error): that is no client's
    signal = chosen_signal(log, explained, named_only, relayed=clients)
    # beside a death or stall notice too: its cause may be an SGLang message shown alone
    if signal is None and not clients or signal is not None and signal.kind in UNNAMED:
        errors = error_catalog_for(release)
        # with the signal's line, what the paste stage opened out of it (an error body's
        # message: a line of the same number)
        lines = [signal.line, *_opened(signal.line, log.tail)] if signal else log.tail
        shown = sglang_message(lines, errors) if errors else None
        if shown is not None:
            log.tracebacks.append(shown)
            if (found := classified()) is not None:
                return [found]
    return [] if signal is None else [signal_incident(log, signal)]


def chosen_signal(
    log: ScannedLog,
    explained: set[tuple[int, str]] | None = None,
    named_only: bool = False,
    relayed: bool = False,
) -> FailureSignal | None:
    """The most telling signal of the input no incident explains (`explained`: the lines
    the incidents cite); argparse's usage dump counts as one. `named_only`: only a catalog
    message of a server failure (beside a client's failure, a death or stall notice);
    `relayed`: such a message counts even on a line a client's finding cites."""
    explained = explained or set()
    signals = [
        s
        for s in log.signals
        if not (named_only and (s.entry is None or _is_client(s)))
        and ((s.line.number, s.line.text) not in explained or relayed)
    ]
    for dump in [] if named_only else log.usage_dumps:
        if dump.error is None and not dump.options:
            continue  # `usage: ` in other text (`token usage: 0.9`), not argparse's
        line = dump.error or dump.first
        if (line.number, line.text) not in explained:
            signals.append(FailureSignal(line, "argparse" if dump.error else "usage"))
    if not signals:
        return None
    order = {kind: i for i, kind in enumerate((*KIND_ORDER, "usage"))}
    return min(signals, key=lambda s: (order.get(s.kind, len(order)), s.line.number))


def signal_incident(log: ScannedLog, signal: FailureSignal, site: object | None = None) -> Incident:
    """The incident for a signal no rule explained (`site`: the SGLang raise site whose
    message the line holds, found by the caller)."""
    line = signal.line
    rule_class, title = KIND_TITLES.get(signal.kind, ("unknown", "A failure no rule recognises"))
    advice: list[str] = []
    explanation = f"The input shows a failure at line {line.number}: `{_shown(line)}`."
    rule = f"signal-{signal.kind}"
    if signal.kind == "catalog" and signal.entry is not None:
        entry = catalog_entries()[signal.entry]
        rule_class, rule = entry.rule_class, f"signal-{entry.kind}"
        title = f"{_kind_name(entry.kind)}: {entry.key}"
        advice.append(entry.advice)
        explanation += f" It is {_kind_name(entry.kind)}'s message ({entry.source})."
    elif site is not None:
        rule_class = getattr(site, "family", None) and site.family.rule_class or rule_class  # type: ignore[attr-defined]
        explanation += f" {site.sentence()}"  # type: ignore[attr-defined]
    if signal.kind in ADVICE_KIND:
        advice.append(ADVICE_KIND[signal.kind])
    phase = _phase_reached(log, line.number)
    explanation += f" The log had reached {phase}." if phase else ""
    advice.append(NEXT_EVIDENCE.get(signal.kind, DEFAULT_NEXT))
    evidence = _evidence(log, line)
    return Incident(
        rule_class=rule_class,
        rule="unknown" if rule_class == "unknown" else rule,
        title=title,
        # a client's failure next to a server: a finding, not the server's failure
        severity="info" if rule_class == "client_error" else "error",
        source=log.summary.path,
        line=line.number,
        ranks=[line.rank_label] if line.rank_label else [],
        evidence=evidence,
        span=None,
        offending_flags=[],
        explanation=explanation,
        advice=advice,
    )


def _opened(line: Line, tail: list[Line]) -> list[Line]:
    return [ln for ln in tail if ln.number == line.number and ln.text != line.text]


def _is_client(signal: FailureSignal) -> bool:
    if signal.kind == "client":
        return True
    return signal.entry is not None and catalog_entries()[signal.entry].rule_class == "client_error"


def _kind_name(kind: str) -> str:
    return {"cuda": "the CUDA runtime", "nccl": "NCCL", "torch": "torch", "linker":
            "the dynamic linker", "triton": "Triton", "transformers": "transformers",
            "huggingface_hub": "huggingface_hub", "libc": "the C library"}.get(kind, kind)  # fmt: skip


def _shown(line: Line) -> str:
    text = line.text.strip()
    return text if len(text) <= 200 else text[:197] + "..."


def _phase_reached(log: ScannedLog, number: int) -> str | None:
    before = [name for at, name in log.phases if at < number]
    if before:
        return f"the `{before[-1]}` step"
    return "startup (its server arguments were printed)" if log.startup_began else None


def _evidence(log: ScannedLog, line: Line) -> list[Line]:
    around = log.context.get(line.number) or [line]
    unique = {ln.number: ln for ln in [*around, line] if ln.number <= line.number + 1}
    return [unique[n] for n in sorted(unique)]


def sglang_message(lines: list[Line], errors: object) -> Traceback | None:
    """An SGLang raise site's message shown without its traceback (the text alone, after a
    prefix or a wrapper's `...: `, or cut short): the exception its site raises, to classify
    as any."""
    shown = [(line, _wrapped_texts(line)) for line in reversed(lines)]
    # one pass over all the lines first: most logs hold no whole message at all
    joined = "\n".join(texts[0] for _, texts in shown if texts)
    whole = bool(joined) and errors.may_hold(joined)  # type: ignore[attr-defined]
    for line, texts in shown:
        for text in texts:
            sites = (errors.place(None, text) if whole else []) or errors.cut_short(text)  # type: ignore[attr-defined]
            if sites:
                return Traceback((line,), (), sites[0].exception or "Exception", text, ())
    return None


def _wrapped_texts(line: Line) -> list[str]:
    """A line's body and what follows each of its first `...: ` wrappers, long enough."""
    body = line.body.strip()
    texts = [body, *(body.split(": ", n)[-1] for n in range(1, MAX_WRAPPERS + 1))]
    return [t for t in dict.fromkeys(t.strip() for t in texts) if len(t) >= MIN_MESSAGE]

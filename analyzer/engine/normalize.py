"""Stage 1: unwrap what the user's tools wrapped around each line, before scanning.

What users paste is rarely the log as SGLang wrote it. `docker compose logs` puts the
service in front (`sglang-1  | `), `kubectl logs --prefix` the pod and container, journald
the date, host and process, CI runners a timestamp, `grep -n` / `grep -H` the line number
and file, pytest its `E   ` failure lines, FastChat's `date | LEVEL | name | `, an issue comment `> ` quotes and markdown fences. Each form is recognised by being
consistent across the input (most lines of a sample carry it), stripped from every line
that carries it, and peeled in layers (`> ` quotes around `grep -n` output, say).

Nothing is rewritten: a line keeps its number and its text for the evidence; only where
SGLang's own line starts (the `body` the rules read) moves. The scanner asks `prefix_length`
per line, so the literal fast path and the line-by-line path see the same bodies.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import regex

from analyzer.sglang.log_format import TORCHRUN_RANK

SAMPLE_LINES = 400
MIN_SHARE = 0.5
MAX_LAYERS = 3
FENCE = regex.compile(r"^\s*(?:```|~~~)[\w+-]*\s*$")
GREP_SEPARATOR = "--"


@dataclass(frozen=True)
class PrefixForm:
    """One way a tool prefixes lines; `numbered`: its numbers must increase (grep -n).

    `pattern` is matched where the line, or what the layer peeled before it left, starts."""

    name: str
    pattern: regex.Pattern
    numbered: bool = False
    # unmistakable on any line (an issue comment quoting a few lines among its prose)
    anywhere: bool = False


FORMS = (
    PrefixForm("quote", regex.compile(r"> ?"), anywhere=True),
    PrefixForm("kubectl", regex.compile(r"\[pod/[^\s\]/]+/[^\s\]]+\] "), anywhere=True),
    PrefixForm(
        "journald",
        regex.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s:\[]+(?:\[\d+\])?: "),
    ),
    PrefixForm(
        "timestamp",  # CI runners, CRI/containerd, kubectl --timestamps, GitLab's raw log
        regex.compile(
            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?"
            r"(?: (?:stdout|stderr) [FP]| \d\d[OE]\+?)? ?"
            # Jenkins' Timestamper: bracketed, with its zone (SGLang's own `[date time]` has
            # a space and no zone)
            r"|\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)\] ?"
        ),
    ),
    # Python logging's pipe layout `%(asctime)s | %(levelname)s | %(name)s | `: FastChat's
    # workers log the SGLang runtime they host this way (stdout/stderr as logger names)
    PrefixForm(
        "pipe-logger",
        regex.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? \| [A-Z]+ *\| [\w.-]+ *\| ?"),
    ),
    PrefixForm("docker-compose", regex.compile(r"[A-Za-z0-9][\w.-]*\s*\| ?")),
    # torchrun prefixes the ranks' lines, never its elastic agent's: a share is enough
    PrefixForm("torchrun", TORCHRUN_RANK, anywhere=True),
    PrefixForm(
        "grep-file-number",
        regex.compile(r"(?P<file>[\w./~-]*\w\.\w+)[:-](?P<number>\d+)(?::|-(?!\d))"),
        numbered=True,
    ),
    PrefixForm("grep-number", regex.compile(r"(?P<number>\d+)(?::|-(?!\d))"), numbered=True),
    PrefixForm("grep-file", regex.compile(r"[^\s:]+\.(?:log|txt|out|err):")),
    PrefixForm("rank-label", regex.compile(r"\d{1,4}: ")),  # srun --label, pdsh
    # pytest (a CI job testing a server): the exception as `E   Type: message` under the
    # failing code, and the short summary's `FAILED path::test - Type: message`
    PrefixForm("pytest", regex.compile(r"(?:E {3}|(?:FAILED|ERROR) \S+::\S+ - )"), anywhere=True),
)


@dataclass(frozen=True)
class LinePrefixes:
    """The prefix forms of one input, outermost first, and whether fences are noise."""

    forms: tuple[PrefixForm, ...] = ()
    fenced: bool = False

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.forms] + (["markdown-fence"] if self.fenced else [])

    def prefix_length(self, text: str) -> int:
        """How many leading characters of a line the user's tools added (all of a fence
        or a grep `--` separator: they carry nothing of the log)."""
        at = 0
        for form in self.forms:
            # on the rest of the line (a `^` in a form does not match at a `pos` past 0)
            found = form.pattern.match(text[at:] if at else text)
            if found:
                at += found.end()
        rest = text[at:]
        if (self.fenced and FENCE.match(rest)) or (
            rest == GREP_SEPARATOR and any(f.numbered for f in self.forms)
        ):
            return len(text)
        return at


NO_PREFIXES = LinePrefixes()


def detect_prefixes(lines: Iterable[str]) -> LinePrefixes:
    """The consistent prefix forms of a sample of an input's first lines (ANSI stripped)."""
    sample = [ln for ln in _first(lines, SAMPLE_LINES) if ln.strip()]
    fenced = any(FENCE.match(ln) for ln in sample)
    forms: list[PrefixForm] = []
    current = sample
    for _ in range(MAX_LAYERS):
        form = _consistent_form(current)
        if form is None:
            break
        forms.append(form)
        current = [_strip(ln, form) for ln in current]
    if not forms and not fenced:
        return NO_PREFIXES
    return LinePrefixes(tuple(forms), fenced)


def _first(lines: Iterable[str], count: int) -> list[str]:
    taken = []
    for line in lines:
        taken.append(line)
        if len(taken) >= count:
            break
    return taken


def _strip(line: str, form: PrefixForm) -> str:
    found = form.pattern.match(line)
    return line[found.end() :] if found else line


def _consistent_form(lines: list[str]) -> PrefixForm | None:
    """The form most of the lines carry (ties: the order of FORMS), if any."""
    # a line left blank by an outer layer (`> ` alone, between quoted lines) carries nothing
    content = [ln for ln in lines if ln.strip() and not FENCE.match(ln) and ln != GREP_SEPARATOR]
    if not content:
        return None
    needed = max(1, int(MIN_SHARE * len(content) + 0.999)) if len(content) > 2 else len(content)
    best: tuple[int, PrefixForm] | None = None
    for form in FORMS:
        matches = [m for ln in content if (m := form.pattern.match(ln))]
        if len(matches) < (1 if form.anywhere else needed) or (
            form.numbered and not _increasing(matches)
        ):
            continue
        if not any(m.end() < len(m.string) for m in matches):
            continue  # the form would eat whole lines: it is the content, not a prefix
        if best is None or len(matches) > best[0]:
            best = (len(matches), form)
    return best[1] if best else None


def _increasing(matches: list[regex.Match]) -> bool:
    """grep numbers go up through the input (per file for grep -H across files)."""
    last: dict[str, int] = {}
    for found in matches:
        groups = found.groupdict()
        key, number = groups.get("file") or "", int(groups["number"])
        if number <= last.get(key, 0):
            return False
        last[key] = number
    return True

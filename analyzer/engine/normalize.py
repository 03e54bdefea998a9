"""Stage 1: unwrap what the user's tools wrapped around each line, before scanning.

What users paste is rarely the log as SGLang wrote it. `docker compose logs` puts the
service in front (`sglang-1  | `), `kubectl logs --prefix` the pod and container, journald
the date, host and process, CI runners a timestamp, `grep -n` / `grep -H` the line number
and file, pytest its `E   ` failure lines, FastChat's `date | LEVEL | name | `, an issue
comment `> ` quotes and markdown fences (GitHub's `<details>` around them too). Each form
is recognised by being consistent across the input (most lines of a sample carry it),
stripped from every line that carries it, and peeled in layers (`> ` quotes around
`grep -n` output, say). What pasting did to the text itself is undone in engine/paste.py.

Nothing is rewritten: a line keeps its number and its text for the evidence; only where
SGLang's own line starts (the `body` the rules read) moves. The scanner asks `body_span`
per line, so the literal fast path and the line-by-line path see the same bodies.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from analyzer.sglang.log_format import TORCHRUN_RANK

SAMPLE_LINES = 400
MIN_SHARE = 0.5
MAX_LAYERS = 3
# a markdown fence, and the lines of GitHub's collapsible block around one (`<details>`,
# `<summary>Log</summary>`): they carry nothing of the log
FENCE = re.compile(
    r"^\s*(?:(?:```|~~~)[\w+-]*|(?:</?(?:details|summary)\b[^<>]*>[^<>]*)+)\s*$", re.IGNORECASE
)
GREP_SEPARATOR = "--"


@dataclass(frozen=True)
class PrefixForm:
    """One way a tool prefixes lines; `numbered`: its numbers must increase (grep -n).

    `pattern` is matched where the line, or what the layer peeled before it left, starts."""

    name: str
    pattern: re.Pattern
    numbered: bool = False
    # unmistakable on any line (an issue comment quoting a few lines among its prose)
    anywhere: bool = False
    # a column the tool writes after the message, at the line's end, on the lines that carry
    # the prefix (`path`: its text, learnt to find it where the message filled its column)
    suffix: re.Pattern | None = None


FORMS = (
    PrefixForm("quote", re.compile(r"> ?"), anywhere=True),
    PrefixForm("kubectl", re.compile(r"\[pod/[^\s\]/]+/[^\s\]]+\] "), anywhere=True),
    PrefixForm(
        "journald",
        re.compile(r"[A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \S+ [^\s:\[]+(?:\[\d+\])?: "),
    ),
    PrefixForm(
        "timestamp",  # CI runners, CRI/containerd, kubectl --timestamps, GitLab's raw log
        re.compile(
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
        re.compile(r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d(?:[.,]\d+)? \| [A-Z]+ *\| [\w.-]+ *\| ?"),
    ),
    PrefixForm("docker-compose", re.compile(r"[A-Za-z0-9][\w.-]*\s*\| ?")),
    # torchrun prefixes the ranks' lines, never its elastic agent's: a share is enough
    PrefixForm("torchrun", TORCHRUN_RANK, anywhere=True),
    PrefixForm(
        "grep-file-number",
        re.compile(r"(?P<file>[\w./~-]*\w\.\w+)[:-](?P<number>\d+)(?::|-(?!\d))"),
        numbered=True,
    ),
    PrefixForm("grep-number", re.compile(r"(?P<number>\d+)(?::|-(?!\d))"), numbered=True),
    PrefixForm("grep-file", re.compile(r"[^\s:]+\.(?:log|txt|out|err):")),
    PrefixForm("rank-label", re.compile(r"\d{1,4}: ")),  # srun --label, pdsh
    # a launcher's tag for the worker whose output it relays (`[agg_worker_0] `): a name
    # alone in brackets (SGLang's own `[time TPn]` has a space, torchrun's `[rank0]:` a colon)
    PrefixForm("worker-tag", re.compile(r"\[[A-Za-z_][\w.-]*\] ")),
    # rich's RichHandler (a launcher logging its workers' output through it): rich/logging.py
    # RichHandler.get_level_text pads the level to 8, rich/_log_render.py LogRender lays out
    # a `[%x %X]` time column (spaces when the time repeats), the level, the message, and
    # the logging call's `file.py:N` in a column of its own at the right (grid padding 1)
    PrefixForm(
        "rich",
        re.compile(
            r"(?:\[[^\]\n]{4,40}\] | {4,41})?(?:DEBUG {4}|INFO {5}|WARNING {2}|ERROR {4}|CRITICAL )"
        ),
        # two spaces at least where it is learnt; a message that fills its column runs into it
        suffix=re.compile(r"(?<=\S) {2,}(?P<path>[\w.-]+\.py:\d+) *$"),
    ),
    # pytest (a CI job testing a server): the exception as `E   Type: message` under the
    # failing code, and the short summary's `FAILED path::test - Type: message`
    PrefixForm("pytest", re.compile(r"(?:E {3}|(?:FAILED|ERROR) \S+::\S+ - )"), anywhere=True),
    # an issue's prose quoting the exception in markdown emphasis or a code span
    # (`**AttributeError: ...**`, `... end with **_OSError: ..._** ?`, `` `KeyError: 'x'` ``):
    # the opening marker, after a space or at the start, right before the exception's type;
    # never behind a `[` (a logger's `[date time]` line quoting an exception stays content),
    # and the closing marker is a column the body ends before
    PrefixForm(
        "markdown-emphasis",
        re.compile(
            r"(?:[^\[\n]*?[\s(:,])?(?:\*{1,2}_{0,2}|_{1,2}\*{1,2}|`{1,3})"
            r"(?=(?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception): )"
        ),
        anywhere=True,
        suffix=re.compile(r"(?<=\S)(?P<path>_{0,2}\*{1,2}|`{1,3})(?=[\s?!.,;:)]|$)"),
    ),
)


# Where SGLang's own text starts on a line (and Python's, argparse's, uvicorn's under it): the
# `[date time TPn]` of its logger, a traceback's header, frame and exception lines,
# argparse's usage and error, log levels, the launch command. Whatever a line carries
# before its first anchor is what a tool put there.
ANCHOR = re.compile(
    r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"
    r"|Traceback \(most recent call last\):"
    r"|  File \""
    r"|(?<![\w.])[A-Za-z_][\w.]*(?:Error|Exception|Interrupt)(?::|$)"
    # argparse's prog may be two words (`sglang serve`)
    r"|usage: |(?<![\w./-])[\w./-]+(?: [\w.-]+)?: error: "
    # uvicorn's `INFO:     `, logging's `ERROR:root:`, rich's padded `INFO     ` (a level
    # with one space is too common inside formats: NCCL's `host:pid:tid [0] NCCL INFO `)
    r"|(?<!NCCL )(?:INFO|WARNING|ERROR|DEBUG|CRITICAL)(?::| {2,})"
    r"|server_args=ServerArgs\("
    r"|python3? -m sglang\.|sglang serve "
)
MIN_ANCHORED = 2
MAX_LEARNED = 80
ANCHOR_SPAN = 40  # room for the anchor itself past the longest prefix
LEARN_LINES = 120  # a tool's prefix is on every line: the first ones tell it
DIGITS = re.compile(r"\d+")
SEPARATORS = " \t:|])>"


def learned_form(lines: list[str]) -> PrefixForm | None:
    """A prefix no known tool explains, learned from the lines themselves: the text before
    SGLang's own starts (ANCHOR), when most anchored lines carry the same one up to its
    digits (a host `node07: `, an actor `(Engine pid=88, ip=10.0.0.2) `, a pod and container,
    a wrapper's `2026-01-05 10:00:01,123 `, an indented paste)."""
    shapes: list[str] = []
    anchored = unprefixed = 0
    sample = lines[:LEARN_LINES]
    for line in sample:
        if ANCHOR.match(line):
            anchored += 1
            unprefixed += 1
            if unprefixed > MIN_SHARE * len(sample):
                return None  # most lines start as SGLang's do: nothing to learn
            continue
        # a prefix is short: look no further (a megabyte line costs no more than a short one)
        found = ANCHOR.search(line, 0, MAX_LEARNED + ANCHOR_SPAN)
        if found is None:
            continue
        anchored += 1
        if found.start() <= MAX_LEARNED:
            shapes.append(DIGITS.sub("0", line[: found.start()]))
    # a paste of a line or three: one line of SGLang's is all there is to learn from
    least = 1 if len([ln for ln in sample if ln.strip()]) <= 3 else MIN_ANCHORED
    needed = max(least, MIN_SHARE * anchored)
    # the longest start, up to a separator, that enough anchored lines share (a line's own
    # `+ ` of `set -x` or `$ ` of a prompt may follow the tool's prefix)
    counts: dict[str, int] = {}
    for shape in shapes:
        for i, c in enumerate(shape):
            if c in SEPARATORS:
                counts[shape[: i + 1]] = counts.get(shape[: i + 1], 0) + 1
    # a shell's `+ ` (set -x) or `$ ` is the line's own text, not a tool's: a prefix names
    # something (a host, a pod, a time) or is an indent
    shared = [c for c, n in counts.items() if n >= needed and (_names(c) or c.isspace())]
    if not shared:
        return None
    shape = max(shared, key=lambda c: (len(c), c))
    pattern = "".join(r"\d+" if part == "0" else re.escape(part) for part in _parts(shape))
    return PrefixForm("learned", re.compile(pattern))


def _names(shape: str) -> bool:
    return any(c.isalnum() for c in shape)


def _parts(shape: str) -> list[str]:
    return [p for p in re.split(r"(0)", shape) if p]


@dataclass(frozen=True)
class LinePrefixes:
    """The prefix forms of one input, outermost first, and whether fences are noise.

    `columns`: the right-hand column texts a suffix form showed in the sample, to find
    them also where the message ran into them with no space between."""

    forms: tuple[PrefixForm, ...] = ()
    fenced: bool = False
    columns: tuple[str, ...] = ()

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.forms] + (["markdown-fence"] if self.fenced else [])

    def body_span(self, text: str) -> tuple[int, int, int]:
        """Where SGLang's text lies in a line: after what the user's tools added in front
        (all of a fence or a grep `--` separator: they carry nothing of the log), and
        before a column one of them added at the end; and how many layers it carried."""
        at, end, layers = 0, len(text), 0
        for form in self.forms:
            # on the rest of the line (a `^` in a form does not match at a `pos` past 0)
            found = form.pattern.match(text[at:] if at else text)
            if found:
                at += found.end()
                layers += 1
                if form.suffix is not None:
                    end = min(end, self._column_start(text, at, form.suffix))
        rest = text[at:]
        if (self.fenced and FENCE.match(rest)) or (
            rest == GREP_SEPARATOR and any(f.numbered for f in self.forms)
        ):
            return len(text), len(text), layers
        return at, max(at, end), layers

    def _column_start(self, text: str, at: int, suffix: re.Pattern) -> int:
        kept = text.rstrip()
        for column in self.columns:  # longest first
            if kept.endswith(column) and len(kept) - len(column) > at:
                return len(kept[: len(kept) - len(column)].rstrip())
        found = suffix.search(text, at)
        return found.start() if found else len(text)


NO_PREFIXES = LinePrefixes()


def detect_prefixes(lines: Iterable[str]) -> LinePrefixes:
    """The consistent prefix forms of a sample of an input's first lines (ANSI stripped)."""
    sample = [ln for ln in _first(lines, SAMPLE_LINES) if ln.strip()]
    fenced = any(FENCE.match(ln) for ln in sample)
    forms: list[PrefixForm] = []
    columns: set[str] = set()
    current = sample
    for _ in range(MAX_LAYERS):
        form = _consistent_form(current) or _checked(learned_form(current), current)
        if form is None:
            break
        forms.append(form)
        if form.suffix is not None:
            columns |= _columns(current, form)
        current = [_strip(ln, form) for ln in current]
    if not forms and not fenced:
        return NO_PREFIXES
    return LinePrefixes(tuple(forms), fenced, tuple(sorted(columns, key=lambda c: (-len(c), c))))


def _first(lines: Iterable[str], count: int) -> list[str]:
    taken = []
    for line in lines:
        taken.append(line)
        if len(taken) >= count:
            break
    return taken


def _strip(line: str, form: PrefixForm) -> str:
    found = form.pattern.match(line)
    if not found:
        return line
    column = form.suffix.search(line, found.end()) if form.suffix is not None else None
    return line[found.end() : column.start() if column else len(line)]


def _columns(lines: list[str], form: PrefixForm) -> set[str]:
    """The texts of a suffix form's column on the lines that carry its prefix."""
    assert form.suffix is not None
    found = set()
    for line in lines:
        prefix = form.pattern.match(line)
        column = form.suffix.search(line, prefix.end()) if prefix else None
        if column:
            found.add(column["path"])
    return found


def _consistent_form(lines: list[str], forms: tuple[PrefixForm, ...] = FORMS) -> PrefixForm | None:
    """The form most of the lines carry (ties: the order of FORMS), if any."""
    # a line left blank by an outer layer (`> ` alone, between quoted lines) carries nothing
    content = [ln for ln in lines if ln.strip() and not FENCE.match(ln) and ln != GREP_SEPARATOR]
    if not content:
        return None
    needed = max(1, int(MIN_SHARE * len(content) + 0.999)) if len(content) > 2 else len(content)
    best: tuple[int, PrefixForm] | None = None
    for form in forms:
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


def _checked(form: PrefixForm | None, lines: list[str]) -> PrefixForm | None:
    """A learned form held to the known forms' bar: most content lines carry it."""
    return form if form is not None and _consistent_form(lines, (form,)) else None


def _increasing(matches: list[re.Match]) -> bool:
    """grep numbers go up through the input (per file for grep -H across files)."""
    last: dict[str, int] = {}
    for found in matches:
        groups = found.groupdict()
        key, number = groups.get("file") or "", int(groups["number"])
        if number <= last.get(key, 0):
            return False
        last[key] = number
    return True

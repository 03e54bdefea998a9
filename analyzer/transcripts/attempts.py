"""From a transcript's events to launch attempts and what the session saw of each.

Every SGLang launch is an attempt: directly, inside `ssh host '...'` or `bash -c '...'`,
or in a script written with a heredoc (or an editor tool) and run later. An attempt
owns what followed it until the next launch: looks at its log (cat/tail/grep/less of the
path it redirects to; a foreground launch's own output), `ls` of that path, pgrep/ps,
nvidia-smi, health polls, kills, and the user's words ("crashed"). The last nvidia-smi
before a launch (not followed by a kill) is kept as the GPUs' state at the launch.

Output of a compound command is split into the parts each command printed: at `echo`
markers when the command prints them (`ls ...; echo ---; pgrep ...`), else by the shape
of each diagnostic's lines. Everything kept is bounded: a huge transcript is streamed
and only the attempts' evidence stays in memory.
"""

from __future__ import annotations

import shlex
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import regex

from analyzer.core.model import Line
from analyzer.engine.scan import MAX_STATED_VERSIONS
from analyzer.rulebook.vocabulary import Rule
from analyzer.sglang.launch_command import parse_launch_command
from analyzer.sglang.log_format import stated_version
from analyzer.transcripts import client_failures, command_outputs, shell
from analyzer.transcripts.command_outputs import NumberedLine
from analyzer.transcripts.events import Event, FileWrite, ShellCall, UserMessage
from analyzer.transcripts.session import (
    Attempt,
    ClientFailure,
    Launch,
    LogView,
    Observation,
    Session,
)
from analyzer.transcripts.shell import (
    ENTRY_MODULES,
    HELP_FLAGS,
    LOOPS,
    balanced,
    command_ref,
    interpreter_of,
    is_entry,
    is_entry_command,
    is_runner_logs,
    kills_server,
    log_path_of,
    output_sections,
    same_file,
    statement_lines,
    strip_grep_prefix,
    subtree,
)

TakesValue = Callable[[str], "bool | None"]
_Seen = TypeVar("_Seen", Observation, LogView)


LOG_READERS = frozenset(
    {"cat", "tail", "head", "less", "more", "grep", "egrep", "fgrep", "rg", "awk", "sed", "tac", "bat"}
)  # fmt: skip
PARTIAL_READERS = frozenset({"tail", "head", "grep", "egrep", "fgrep", "rg", "awk", "sed"})
PROCESS_TOOLS = frozenset({"pgrep", "ps"})
KILLERS = frozenset({"kill", "pkill", "killall", "fuser"})
BARE_VERSION = regex.compile(r"^\d+\.\d+\.\d+(?:\.post\d+)?$")


LOGGY = regex.compile(r"(?:\.log|\.out|\.err|\.txt)$|log")


USER_REPORT = regex.compile(
    r"(?i)\b(?:crash(?:ed|es|ing)?|died|dead|down|killed|oom|not (?:up|starting|responding)"
    r"|hangs?|hanging|hung|stuck|fail(?:ed|s|ing)?|broke(?:n)?|no response|timed? ?out)\b"
)


SHELL_ERRORS = (
    ("nohup_failed", regex.compile(r"nohup: failed to run command [‘'`](?P<what>[^’'`]+)[’'`]: (?P<why>.+)")),
    ("no_module", regex.compile(r"(?P<what>\S*python[\d.]*): No module named (?P<module>\S+)")),
    ("no_module", regex.compile(r"ModuleNotFoundError: No module named '(?P<module>sglang[\w.]*)'")),
    ("not_found", regex.compile(r"(?:bash|sh|zsh|nohup)(?:: line \d+)?: (?P<what>[^:\s]+): (?:command )?not found")),
    ("no_such_file", regex.compile(r"(?:bash|sh|zsh)(?:: line \d+)?: (?P<what>[^:]+): No such file or directory")),
    ("permission", regex.compile(r"(?:bash|sh|zsh|nohup)(?:: line \d+)?: (?P<what>[^:]+): Permission denied")),
    ("syntax", regex.compile(r"(?:bash|sh|zsh)(?:: -c)?: (?:line \d+: )?(?P<what>syntax error.*|unexpected EOF while looking for matching .+)")),
    ("ssh_failed", regex.compile(r"(?P<what>ssh: (?:connect to host .+|Could not resolve hostname .+)|Permission denied \(publickey.*\))")),
)  # fmt: skip


# SGLang's own log lines or frames: a command's output that shows them is the server's
SERVER_LINES = regex.compile(
    r"(?m)^\[\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d[^\]]*\]|sglang/srt/|server_args=ServerArgs\("
)


MAX_ATTEMPTS = 500
MAX_VIEWS = 50
MAX_VIEW_LINES = 20_000
VIEW_HEAD_LINES = 2_000
MAX_OBSERVATIONS = 200
MAX_COMMAND_CHARS = 200_000


@dataclass
class _Script:
    """A script the session wrote: its text and where that text sits in the transcript."""

    text: str
    ref: str | None
    first_line: int


class SessionBuilder:
    """Consumes events in order; keeps only attempts and their bounded evidence."""

    def __init__(
        self, takes_value: TakesValue | None = None, client_rules: Sequence[Rule] = ()
    ) -> None:
        self.takes_value = takes_value
        self.client_rules = client_rules
        self.clients: list[ClientFailure] = []
        self.answered: int | None = None
        self.views_added = 0
        self.attempts: list[Attempt] = []
        self.scripts: dict[str, _Script] = {}
        self.made_dirs: set[str] = set()
        self.last_gpus: Observation | None = None
        self.notes: list[str] = []
        self.before_launch = False
        self.stated_versions: list[tuple[str, Line]] = []
        self.seq = 0
        # what the session saw of an SGLang log before any launch it could read
        self.loose: list[LogView] = []

    def feed(self, event: Event) -> None:
        if isinstance(event, ShellCall):
            self._call(event)
        elif isinstance(event, UserMessage):
            self._user(event)
        elif isinstance(event, FileWrite):
            self.scripts[event.path] = _Script(event.content, event.ref, 1)

    def finish(self) -> Session:
        if len(self.attempts) >= MAX_ATTEMPTS:
            self.notes.append(f"only the first {MAX_ATTEMPTS} launches were followed")
        session = Session(self.attempts, self.notes, self.made_dirs, self.stated_versions)
        session.clients, session.answered = self.clients, self.answered
        session.loose_views = self.loose
        return session

    # ---- events

    def _user(self, message: UserMessage) -> None:
        self._clients(client_failures.in_message(message))
        if self.attempts and len(message.text) <= 500 and USER_REPORT.search(message.text):
            number = message.line if message.line is not None else 1
            self._observe(
                Observation(
                    "user",
                    message.text,
                    [(number, message.text.strip())],
                    message.ref,
                    message.timestamp,
                )
            )

    def _call(self, call: ShellCall) -> None:
        if call.output_of is not None:
            self._background_output(call)
            return
        if len(call.command) > MAX_COMMAND_CHARS:
            return
        level = shell.parse(call.command)
        self._remember_scripts(call, level)
        launch = None if len(self.attempts) >= MAX_ATTEMPTS else self._find_launch(call, level)
        if launch is not None:
            attempt = Attempt(len(self.attempts) + 1, launch, gpus_before=self.last_gpus)
            self.attempts.append(attempt)
        views, loose = self.views_added, len(self.loose)
        self._read_output(call, level, launch)
        if launch is None and self.views_added == views and len(self.loose) == loose:
            if not self.attempts and SERVER_LINES.search(call.output):
                # a launch the session ran that we cannot read (`./start.sh`, an alias)
                lines = list(call.output_lines())
                self._add_loose(
                    LogView("output", call.command, lines, call.ref, call.timestamp, True)
                )
            else:
                self._clients(client_failures.in_call(call, level, self.client_rules))
        self._note_versions(call)

    def _clients(self, found: list[ClientFailure]) -> None:
        for failure in found[: client_failures.MAX_FAILURES - len(self.clients)]:
            failure.attempt = len(self.attempts) or None
            failure.seq = self._tick()
            self.clients.append(failure)

    def _note_versions(self, call: ShellCall) -> None:
        """Versions the session saw: pip output, or `print(sglang.__version__)`'s answer."""
        asked = "sglang" in call.command and "__version__" in call.command
        previous = None
        for number, text in call.output_lines():
            version = stated_version(text, previous)
            if version is None and asked and BARE_VERSION.match(text.strip()):
                version, asked = text.strip(), False
            previous = text
            if version and len(self.stated_versions) < MAX_STATED_VERSIONS:
                self.stated_versions.append((version, Line("", number, text, text, ref=call.ref)))

    def _background_output(self, call: ShellCall) -> None:
        """A later read of a background launch's own output (Claude Code's BashOutput)."""
        owner = next(
            (a for a in reversed(self.attempts) if a.launch.call.ref == call.output_of), None
        )
        lines = [(n, t) for n, t in call.output_lines()]
        if owner is not None and call.status == "killed":  # TaskStop, Ctrl-C to the process
            owner.observations.append(
                self._next(_seen("kill", call.command, [], call, call.command))
            )
        if owner is not None and any(t.strip() for _, t in lines):
            self._shell_errors(call, lines, owner)  # its own, not the latest launch's
            self._add_view(
                owner, LogView("output", call.command, lines, call.ref, call.timestamp, True)
            )

    def _remember_scripts(self, call: ShellCall, level: shell.Level) -> None:
        for command, where in level.walk():
            program = shell.program(command)
            if command.heredoc is not None:
                target = shell.output_file(where, command)
                if program == "tee" and target is None:
                    files = [w for w in command.values[1:] if not w.startswith("-")]
                    target = files[0] if files else None
                if target:
                    offset = call.command.find(command.heredoc) if command.heredoc else -1
                    first = (call.command_line or 1) + max(call.command.count("\n", 0, offset), 0)
                    self.scripts[target] = _Script(command.heredoc, call.ref, first)
            if program == "mkdir":
                self.made_dirs.update(
                    w.rstrip("/") for w in command.values[1:] if not w.startswith("-")
                )

    # ---- launches

    def _find_launch(self, call: ShellCall, level: shell.Level) -> Launch | None:
        for top in level.commands:
            for command, where in subtree(top, level):
                found = self._launch_at(call, level, top, command, where)
                if found is not None:
                    return found if found.text else None
        return None

    def _launch_at(
        self,
        call: ShellCall,
        level: shell.Level,
        top: shell.Command,
        command: shell.Command,
        where: shell.Level,
    ) -> Launch | None:
        """A Launch if this command starts SGLang; an empty-text Launch for `--help`."""
        index = shell.head(command)
        if index is None:
            return None
        words = command.values[index:]
        if command.child is not None and command.leftover:
            lost = [w.value for w in command.leftover]
            if any(m in " ".join(lost) for m in ENTRY_MODULES):
                script = shlex.split(command.child.text) if balanced(command.child.text) else []
                return self._launch(call, level, top, command, where, shlex.join([*script, *lost]))
            return None
        if is_entry(words):
            if HELP_FLAGS & set(words):
                return Launch(call, "", None, None, False, [], [], call.ref)
            return self._launch(call, level, top, command, where, None)
        script = self._script_run(words)
        if script is not None:
            return self._script_launch(call, level, top, command, where, script)
        return None

    def _launch(
        self,
        call: ShellCall,
        level: shell.Level,
        top: shell.Command,
        command: shell.Command,
        where: shell.Level,
        rebuilt: str | None,
    ) -> Launch:
        text = level.statement_text(top)
        parsed = parse_launch_command(text, self.takes_value)
        if parsed is None and rebuilt:
            parsed = parse_launch_command(rebuilt, self.takes_value)
        lines = [(ln, command_ref(call.ref)) for ln in statement_lines(call, level, top)]
        interpreter = interpreter_of(command)
        return Launch(
            call,
            text,
            parsed,
            log_path_of(where, command),
            any(shell.backgrounded(lv, c) for lv, c in shell.outward(where, command)),
            level.all_problems(),
            lines,
            call.ref,
            interpreter=interpreter,
        )

    def _script_run(self, words: list[str]) -> tuple[str, _Script] | None:
        """`bash run.sh`, `sh /tmp/run.sh`, `./run.sh`: the script it runs, if we saw it."""
        if not words:
            return None
        candidates = [words[0]]
        if shell.basename(words[0]) in shell.SHELLS:
            candidates = [w for w in words[1:] if not w.startswith("-")][:1]
        for candidate in candidates:
            for path, script in self.scripts.items():
                if candidate == path or shell.basename(candidate) == shell.basename(path):
                    if (
                        candidate.endswith((".sh", ".bash"))
                        or "/" in candidate
                        or candidate == path
                    ):
                        return path, script
        return None

    def _script_launch(
        self,
        call: ShellCall,
        level: shell.Level,
        top: shell.Command,
        runner: shell.Command,
        where: shell.Level,
        found: tuple[str, _Script],
    ) -> Launch | None:
        path, script = found
        inner = shell.parse(script.text)
        for inner_top in inner.commands:
            for command, inner_where in subtree(inner_top, inner):
                index = shell.head(command)
                if index is None or not is_entry(command.values[index:]):
                    continue
                text = inner.statement_text(inner_top)
                offset = script.text.find(text)
                first = script.first_line + max(script.text.count("\n", 0, offset), 0)
                lines = [
                    ((first + k, t), command_ref(script.ref))
                    for k, t in enumerate(text.split("\n"))
                ]
                log_path = log_path_of(inner_where, command) or log_path_of(where, runner)
                background = shell.backgrounded(inner_where, command) or any(
                    shell.backgrounded(lv, c) for lv, c in shell.outward(where, runner)
                )
                runner_lines = [
                    (ln, command_ref(call.ref)) for ln in statement_lines(call, level, top)
                ]
                return Launch(
                    call,
                    text,
                    parse_launch_command(text, self.takes_value),
                    log_path,
                    background,
                    [*inner.all_problems(), *level.all_problems()],
                    [*runner_lines, *lines],
                    script.ref or call.ref,
                    script=path,
                    interpreter=interpreter_of(command),
                )
        return None

    # ---- output

    def _read_output(self, call: ShellCall, level: shell.Level, launch: Launch | None) -> None:
        numbered = list(call.output_lines())
        self.before_launch = launch is not None
        for commands, lines in output_sections(level, numbered):
            self._section(call, commands, lines, launch)
        self.before_launch = False

    def _section(
        self,
        call: ShellCall,
        pipelines: list[list[tuple[shell.Command, shell.Level]]],
        lines: list[NumberedLine],
        launch: Launch | None,
    ) -> None:
        claimed: set[int] = set()
        readers: list[tuple[str, str, list[str], bool]] = []
        looped = any(shell.program(c) in LOOPS for p in pipelines for c, _ in p)
        launched_here = False
        for pipeline in pipelines:
            first, _ = pipeline[0]
            program = shell.program(first) or ""
            index = shell.head(first) or 0
            arguments = first.values[index + 1 :]
            text = " | ".join(" ".join(c.values) for c, _ in pipeline)
            if launch is not None and any(is_entry_command(c) for c, _ in pipeline):
                launched_here = True
                self.before_launch = False
            elif program in ("ls", "stat"):
                result = command_outputs.parse_ls(arguments, lines)
                claimed.update(n for n, _ in result.lines)
                self._observe(_seen("ls", result, result.lines, call, text))
            elif program in PROCESS_TOOLS:
                check = command_outputs.parse_processes(text, arguments, lines)
                self._observe(_seen("processes", check, check.lines, call, text))
                claimed.update(n for n, _ in check.lines)
            elif program == "nvidia-smi":
                snapshot = command_outputs.parse_nvidia_smi(arguments, lines)
                if snapshot is not None:
                    gpus = _seen("gpus", snapshot, snapshot.lines, call, text)
                    claimed.update(n for n, _ in snapshot.lines)
                    self.last_gpus = gpus
                    if self.before_launch:
                        self.attempts[-1].gpus_before = gpus
                    else:
                        self._observe(gpus)
            elif program in ("curl", "wget"):
                poll = command_outputs.parse_health(text, looped, call.exit_code, lines)
                claimed.update(n for n, _ in poll.lines)
                self._observe(_seen("health", poll, poll.lines, call, text))
                if poll.ok and not self.attempts:
                    self.answered = self._tick()
            elif program in ("dmesg", "journalctl"):
                kills = command_outputs.kernel_kills(lines)
                if kills:
                    self._observe(_seen("kernel_kill", kills, kills, call, text))
            elif program in KILLERS and kills_server(first.values):
                self.last_gpus = None
                if self.before_launch:
                    self.attempts[-1].gpus_before = None
                else:
                    self._observe(_seen("kill", text, [], call, text))
            elif is_runner_logs(first.values[index:]):
                readers.append(("logs", text, [], True))
            elif program in LOG_READERS:
                readers.append(
                    (program, text, arguments, len(pipeline) > 1 or program in PARTIAL_READERS)
                )
        if launched_here and launch is not None:
            self._launch_output(call, launch, lines, claimed)
        for program, text, arguments, partial in readers:
            self._log_look(call, program, text, arguments, partial, lines, claimed)

    def _launch_output(
        self, call: ShellCall, launch: Launch, lines: list[NumberedLine], claimed: set[int]
    ) -> None:
        attempt = self.attempts[-1]
        rest = [(n, t) for n, t in lines if n not in claimed]
        self._shell_errors(call, rest)
        if rest and (not launch.background or launch.log_path is None):
            self._add_view(
                attempt, LogView("output", launch.text, rest, call.ref, call.timestamp, False)
            )

    def _log_look(
        self,
        call: ShellCall,
        program: str,
        text: str,
        arguments: list[str],
        partial: bool,
        lines: list[NumberedLine],
        claimed: set[int],
    ) -> None:
        paths = [a for a in arguments if not a.startswith("-") and ("/" in a or "." in a)]
        if program == "logs":  # a runner's logs: the latest launch's (in a container)
            attempt = self.attempts[-1] if self.attempts else None
        else:
            attempt = self._owner(paths)
        if attempt is None and self.attempts:
            return
        shown: list[NumberedLine] = []
        for number, line in lines:
            if number in claimed:
                continue
            missing = command_outputs.LS_MISSING.match(line)
            if missing:
                result = command_outputs.LsResult(
                    [missing["path"]], missing=[(missing["path"], (number, line))]
                )
                result.lines.append((number, line))
                self._observe(_seen("ls", result, [(number, line)], call, text))
                continue
            shown.append((number, strip_grep_prefix(line, arguments, paths)))
        self._shell_errors(call, shown)
        if shown and attempt is None:
            self._add_loose(LogView(program, text, shown, call.ref, call.timestamp, partial))
        elif shown and attempt is not None:
            self._add_view(
                attempt, LogView(program, text, shown, call.ref, call.timestamp, partial)
            )
        elif attempt is not None and (
            program in ("cat", "tail", "head")
            and call.exit_code in (0, None)
            and not any(o.kind == "ls" and o.ref == call.ref for o in attempt.observations)
        ):
            empty = command_outputs.LsResult(
                paths, entries=[command_outputs.Listing(paths[0], 0, None, (0, ""))]
            )
            self._observe(_seen("ls", empty, [], call, text))

    def _owner(self, paths: list[str]) -> Attempt | None:
        """The latest attempt whose log one of these paths is (a glob may name it)."""
        for attempt in reversed(self.attempts):
            log = attempt.launch.log_path
            if log and any(same_file(p, log) for p in paths):
                return attempt
        if self.attempts and self.attempts[-1].launch.log_path is None:
            if any(LOGGY.search(shell.basename(p)) for p in paths):
                return self.attempts[-1]
        return None

    def _shell_errors(
        self, call: ShellCall, lines: Iterable[NumberedLine], owner: Attempt | None = None
    ) -> None:
        for number, line in lines:
            for kind, pattern in SHELL_ERRORS:
                found = pattern.search(line)
                if found:
                    data = {"kind": kind, **{k: v for k, v in found.groupdict().items() if v}}
                    seen = Observation(
                        "shell_error", data, [(number, line)], call.ref, call.timestamp
                    )
                    self._observe(seen, owner)
                    break

    def _add_view(self, attempt: Attempt, view: LogView) -> None:
        if len(attempt.views) >= MAX_VIEWS:
            attempt.dropped_views += 1
            return
        self.views_added += 1
        attempt.views.append(self._next(_bounded(view)))

    def _add_loose(self, view: LogView) -> None:
        if len(self.loose) < MAX_VIEWS:
            self.loose.append(self._next(_bounded(view)))

    def _observe(self, observation: Observation, owner: Attempt | None = None) -> None:
        if not self.attempts:
            return
        attempt = owner or self.attempts[-1]
        if len(attempt.observations) < MAX_OBSERVATIONS:
            attempt.observations.append(self._next(observation))

    def _next(self, seen: _Seen) -> _Seen:
        seen.seq = self._tick()
        return seen

    def _tick(self) -> int:
        self.seq += 1
        return self.seq


def _bounded(view: LogView) -> LogView:
    """A view of at most MAX_VIEW_LINES: its head and its tail."""
    if len(view.lines) > MAX_VIEW_LINES:
        tail = deque(view.lines, maxlen=MAX_VIEW_LINES - VIEW_HEAD_LINES)
        view.lines = [*view.lines[:VIEW_HEAD_LINES], *tail]
    return view


def _seen(
    kind: str, data: Any, lines: list[NumberedLine], call: ShellCall, text: str
) -> Observation:
    """An observation from a call's output, remembering the call's first command line."""
    first = next(call.command_lines(), None)
    return Observation(kind, data, lines, call.ref, call.timestamp, text, first)


def build_session(
    events: Iterable[Event],
    takes_value: TakesValue | None = None,
    client_rules: Sequence[Rule] = (),
) -> Session:
    """Follow every launch in the events, oldest first; `client_rules` (the client_error
    line rules) also read the output of the clients the session ran."""
    builder = SessionBuilder(takes_value, client_rules)
    for event in events:
        builder.feed(event)
    return builder.finish()

"""The flags whose code path failed: read from a traceback's SGLang frames and the command.

A runtime failure rarely names a flag, and a rule's flags are often its advice
(`--disable-cuda-graph` for any capture failure). The code that failed says more: the
statement the innermost SGLang frame prints (`self.speculative_eagle_topk > 1`), the
functions of the innermost SGLang frames (the code-path map, sglang/code_paths.py: the
draft-extend step of EAGLE reads `speculative_eagle_topk`), and third-party code that runs
for a feature (torch/_dynamo frames under --enable-torch-compile, catalogs/features.toml
`when_set`). Each of them reads many settings; the ones at fault are those the user chose:
a flag the launch command (or the log's `server_args=ServerArgs(...)` record) sets. A
default is no one's choice, with one exception: a `NoneType` error on a statement that
reads a setting left at its `None` default names the flag that is missing.

Without a command the log's own lines may say which settings were on: a line SGLang logs
only when a flag is set (blame/flags_shown.py) counts as the command setting it. Without
such a line either, only the missing flag is told, and the flags of code SGLang runs only
with them set that the traceback ran through (blame/guarded_frames.py; with a command,
those the command sets so).
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from analyzer.blame.guarded_frames import guarded_frames, input_release
from analyzer.core.model import Frame, Traceback
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.code_paths import code_paths_for
from analyzer.sglang.features import frame_flags

if TYPE_CHECKING:
    from analyzer.blame.flags_shown import FlagsShown
    from analyzer.sglang.launch_command import LaunchCommand

SGLANG_CODE = "sglang/srt/"
# the innermost SGLang frames of each traceback part whose functions are read
INNERMOST_FRAMES = 3
# names a statement holds server arguments under (code_paths_build.py reads the same)
HOLDER = re.compile(
    r"(?:\bserver_args|\bglobal_server_args_dict|\bget_global_server_args\(\)"
    r"|\bget_(?:spec|flags|schedule|serving|exec|parallel)\(\)(?:\.[a-z_]+)?)"
    r"(?:\.(?P<attr>[a-z][a-z0-9_]*)|\[\s*['\"](?P<key>[a-z][a-z0-9_]*)['\"]\s*\])"
)
ATTRIBUTE = re.compile(r"\.([a-z][a-z0-9]*(?:_[a-z0-9]+)+)\b")
SELF_ATTRIBUTE = re.compile(r"\bself\.([a-z][a-z0-9_]*)\b")
SERVER_ARGS_FILES = ("sglang/srt/server_args.py", "sglang/srt/arg_groups/")
NONE_ERRORS = ("TypeError", "AttributeError")


def fault_flags(
    traceback: Traceback | None,
    catalog: FlagCatalog,
    command: LaunchCommand | None,
    code_paths: bool = True,
    shown: FlagsShown | None = None,
) -> list[str]:
    """Candidate offending flags of a traceback, the innermost code first.

    `code_paths=False` for a failure a specific rule explains with flags of its own (an
    EAGLE-3 draft run as a plain model names --speculative-draft-model-path): the settings
    its code read are then no more than the context it ran in, and only the missing flag
    and the features whose third-party code ran are added. With no command, `shown` gives
    the flags the log's lines before the traceback show on.
    """
    if traceback is None:
        return []
    parts = (traceback, *traceback.chain)
    if command is not None:
        given = {catalog.canonical(f) for f in command.flags()} - {None}
    elif shown is not None:
        on = shown.before(traceback.first.number)
        given = {catalog.canonical(f) for f in on} - {None}
    else:
        given = set()
    found = [f for part in parts for f in _missing(part, catalog, given)]
    # code SGLang runs only with a flag set (blame/guarded_frames.py)
    release = input_release(shown, catalog)
    found += [g.flag for g in guarded_frames(traceback, catalog, command, release)]
    if not given:
        return list(dict.fromkeys(found))
    paths = code_paths_for(catalog.version) if code_paths else None
    # settings read all over the code (--tp-size, --model-path) point at no code path
    general = paths.ubiquitous if paths is not None else frozenset()
    for part in parts:
        frames = [f for f in reversed(part.frames) if SGLANG_CODE in _path(f)]
        for frame in frames[:INNERMOST_FRAMES] if code_paths else ():
            read = _statement_flags(frame, catalog)
            # argument resolution reads every argument: its raise sites say which failed
            if paths is not None and not _resolves_arguments(frame):
                read += paths.flags_read(frame.file, frame.function)
            found += [f for f in read if catalog.canonical(f) in given and f not in general]
    found += [f for f in frame_flags(traceback, when_set=True) if catalog.canonical(f) in given]
    return list(dict.fromkeys(c for f in found if (c := catalog.canonical(f))))


def _missing(part: Traceback, catalog: FlagCatalog, given: set[str | None]) -> list[str]:
    """`'>' not supported between instances of 'NoneType' and 'int'` on a statement that
    reads a setting whose default is None, which the command does not set: that flag."""
    if part.exception_type.rsplit(".", 1)[-1] not in NONE_ERRORS:
        return []
    if "NoneType" not in part.exception_message or part.last_frame is None:
        return []
    frame = part.last_frame
    if SGLANG_CODE not in _path(frame):
        return []
    missing = []
    for flag in _statement_flags(frame, catalog):
        spec = catalog.spec(flag)
        if spec is not None and spec.default is None and flag not in given:
            missing.append(flag)
    return missing


def _statement_flags(frame: Frame, catalog: FlagCatalog) -> list[str]:
    """The flags the statement a frame prints reads: through a name that holds server
    arguments, `self.X` in ServerArgs' own code, any `.x_y` field of several words."""
    code = frame.code
    if not code:
        return []
    dests = [m["attr"] or m["key"] for m in HOLDER.finditer(code)]
    if _resolves_arguments(frame):
        dests += SELF_ATTRIBUTE.findall(code)  # ServerArgs' own methods
    dests += ATTRIBUTE.findall(code)  # a field of several words, of any object
    flags = [spec.long for d in dests if (spec := catalog.by_dest(d)) is not None]
    return list(dict.fromkeys(flags))


def _resolves_arguments(frame: Frame) -> bool:
    return any(s in _path(frame) for s in SERVER_ARGS_FILES)


def _path(frame: Frame) -> str:
    return frame.file.replace("\\", "/")

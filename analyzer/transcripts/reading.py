"""Open a transcript input as a stream of events, whichever tool wrote it.

Each tool's reader follows one protocol (StreamReader): the input's decompressed bytes, the
Transcript it fills (notes, sessions, lines) and the input's path, to events. READERS holds
one per transcript kind. opencode's storage folder and database are not streams: they are
read where they are, before any stream is opened.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import IO, Protocol

from analyzer.core.read import InputError, TextInput
from analyzer.transcripts import detect
from analyzer.transcripts.claude import read_claude
from analyzer.transcripts.codex import read_codex
from analyzer.transcripts.compressed import open_transcript
from analyzer.transcripts.events import Event, Transcript
from analyzer.transcripts.opencode import read_database, read_export, read_storage
from analyzer.transcripts.terminal_text import read_terminal_text


class StreamReader(Protocol):
    def __call__(
        self, stream: IO[bytes], transcript: Transcript, path: Path | None
    ) -> Iterator[Event]: ...


READERS: dict[str, StreamReader] = {
    detect.OPENCODE: read_export,
    detect.CLAUDE: read_claude,
    detect.CODEX: read_codex,
    detect.TEXT: read_terminal_text,
}


def read_transcript(text_input: TextInput, kind: str, session: str | None = None) -> Transcript:
    """A Transcript whose `events` reads the input lazily (consume it once).

    `session` picks one session of an opencode storage folder or database (default: the
    one active last)."""
    transcript = Transcript(text_input.path, kind, iter(()))
    transcript.events = _events(text_input, transcript, session)
    return transcript


def _events(text_input: TextInput, transcript: Transcript, session: str | None) -> Iterator[Event]:
    path = text_input.file
    if transcript.kind == detect.OPENCODE and path is not None and path.is_dir():
        root = detect.opencode_storage_root(path)
        if root is None:
            transcript.notes.append("not an opencode storage folder (no message/ and part/)")
            return
        yield from read_storage(root, transcript, session)
        return
    if transcript.kind == detect.OPENCODE and path is not None and _is_sqlite(text_input):
        yield from read_database(path, transcript, session)
        return
    try:
        with closing(open_transcript(text_input)) as stream:
            yield from READERS.get(transcript.kind, read_export)(stream, transcript, path)
    except (OSError, EOFError) as exc:
        transcript.notes.append(f"transcript ends early ({exc or type(exc).__name__})")
    if session is not None and session not in transcript.sessions:
        held = ", ".join(transcript.sessions) or "no session id"
        raise InputError(f"{transcript.path}: no session {session} here; it holds: {held}")


def _is_sqlite(text_input: TextInput) -> bool:
    try:
        with closing(text_input.open_binary()) as stream:
            return stream.read(len(detect.SQLITE_MAGIC)) == detect.SQLITE_MAGIC
    except (OSError, EOFError):
        return False

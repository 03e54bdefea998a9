"""Blame for a model-loading failure follows the path that failed.

Loading runs through code that reads many settings (the context length, the memory
fraction, the parallel sizes), so a traceback's frames pass through size flags that did
not fail. What failed is a folder or file: the path flag whose value the message names
(--model-path, --speculative-draft-model-path, --tokenizer-path) is the one to blame, and a
flag that only the frames suggest is not, unless it is a path flag itself.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable

from analyzer.sglang.launch_command import MODEL_PATH_FLAGS, LaunchCommand

LOADING_CLASSES = frozenset({"model_load"})


def loading_flags(
    flags: list[str],
    from_frames: Collection[str],
    message: Iterable[str],
    command: LaunchCommand | None,
) -> list[str]:
    """The path flags whose value the message names first, then the flags not only the
    frames gave (path flags kept)."""
    text = "\n".join(message)
    named = [
        flag
        for flag in MODEL_PATH_FLAGS
        if command is not None and (value := command.get(flag)) and value.rstrip("/") in text
    ]
    kept = [f for f in flags if f not in from_frames or f in MODEL_PATH_FLAGS]
    return [*named, *(f for f in kept if f not in named)]

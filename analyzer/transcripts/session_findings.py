"""The findings a session transcript adds to a log's (its entries of the registry of
everything the tool can report, incidents/finding_registry.py): id, class, severity,
priority, title and doc of each."""

from __future__ import annotations

from analyzer.rulebook.vocabulary import RuleDoc
from analyzer.transcripts.diagnose import GPUS_RULE, PRIORITIES
from analyzer.transcripts.silent_death import SILENT_RULE

# (id, class, severity, priority, title, doc)
SESSION_ENTRIES = (
    (
        GPUS_RULE,
        "gpus_occupied",
        "fatal",
        PRIORITIES[GPUS_RULE],
        "The GPUs were already in use before the launch",
        RuleDoc(
            "nvidia-smi, run in the session before an attempt, showed memory in use on the "
            "GPUs the attempt runs on, and the attempt ran out of memory.",
            "SGLang sizes its weights and KV cache from the memory it finds free: the "
            "out-of-memory error that follows is a consequence, not a setting to tune.",
            "Stop the processes that hold the GPUs (or run on idle ones), then rerun the "
            "same command.",
        ),
    ),
    (
        SILENT_RULE,
        "silent_death",
        "fatal",
        PRIORITIES[SILENT_RULE],
        "An attempt died without saying why",
        RuleDoc(
            "An attempt of the session died and what the session saw of its log explains nothing.",
            "A shell error at launch, quoting that broke `bash -c`, a missing log folder, "
            "another interpreter or a kill end a launch before SGLang logs an error.",
            "Run the same command in the foreground (no nohup, no &) to see its first error; "
            "the incident ranks the likely causes.",
        ),
    ),
)

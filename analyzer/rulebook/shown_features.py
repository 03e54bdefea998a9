"""Which features an input shows its server used: the launch command sets one of the
feature's flags, the server_args record holds a non-default value of one, or a traceback
frame runs in code that exists only for it (analyzer/catalogs/shown_features.toml). A rule's
feature-specific explanation and advice are given only for these, never from a guess."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from analyzer.core import toml_data
from analyzer.core.model import Traceback
from analyzer.sglang.catalog import FlagCatalog
from analyzer.sglang.derived_fields import derived_fields
from analyzer.sglang.launch_command import LaunchCommand


@dataclass(frozen=True)
class ShownFeature:
    name: str
    flag_prefixes: tuple[str, ...]
    frames: tuple[str, ...]


@cache
def _features() -> tuple[ShownFeature, ...]:
    data = toml_data.shipped_toml("analyzer.catalogs", "shown_features.toml")
    return tuple(
        ShownFeature(name, tuple(entry["flag_prefixes"]), tuple(entry["frames"]))
        for name, entry in data.items()
    )


def shown_features(
    command: LaunchCommand | None,
    server_args: dict[str, Any] | None,
    traceback: Traceback | None,
    catalog: FlagCatalog,
) -> frozenset[str]:
    """The names of the features the command, the record or the frames show."""
    shown = set()
    for feature in _features():
        if _in_command(feature, command, catalog) or _in_record(feature, server_args, catalog):
            shown.add(feature.name)
        elif traceback is not None and _in_frames(feature, traceback):
            shown.add(feature.name)
    return frozenset(shown)


def _is_feature_flag(feature: ShownFeature, flag: str) -> bool:
    return flag.startswith(feature.flag_prefixes)


def _in_command(feature: ShownFeature, command: LaunchCommand | None, catalog: FlagCatalog) -> bool:
    if command is None:
        return False
    for argument in command.arguments:
        flag = catalog.canonical(argument.flag) or argument.flag
        if _is_feature_flag(feature, flag) and argument.value not in ("None", "none", "false"):
            return True
    return False


def _in_record(
    feature: ShownFeature, server_args: dict[str, Any] | None, catalog: FlagCatalog
) -> bool:
    derived = derived_fields(catalog.version)  # SGLang's own values show no choice
    for dest, value in (server_args or {}).items():
        spec = catalog.by_dest(dest)
        if spec is None or dest in derived or not _is_feature_flag(feature, spec.long):
            continue
        if value not in (None, False, [], {}, "") and value != spec.default:
            return True
    return False


def _in_frames(feature: ShownFeature, traceback: Traceback) -> bool:
    frames = list(traceback.frames)
    for chained in getattr(traceback, "chain", ()) or ():
        frames.extend(chained.frames)
    paths = [f.file.replace("\\", "/") for f in frames]
    return any(part in path for path in paths for part in feature.frames)

"""A release's model registry as mined by model_registry_build.py (`catalogs/models-VERSION.json`):
per architecture, its draft family, the head counts its attention asserts divide by the TP
size, and (drafts) the decoder-layer names its load_weights accepts."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import cache

from analyzer.core.package_files import package_files

CATALOG_PACKAGE = "analyzer.catalogs"
PREFIX, SUFFIX = "models-", ".json"


@dataclass(frozen=True)
class Architecture:
    name: str
    module: str  # srt/models/FILE.py
    draft: str | None  # EAGLE | EAGLE3 | MTP | None (a target model)
    asserts: tuple[str, ...]  # heads | kv_heads
    layer_names: tuple[str, ...]  # drafts: names load_weights maps to the decoder layer


@dataclass(frozen=True)
class ModelRegistry:
    version: str
    architectures: dict[str, Architecture]

    def get(self, name: str) -> Architecture | None:
        return self.architectures.get(name)

    def drafts(self, family: str) -> list[str]:
        return sorted(a.name for a in self.architectures.values() if a.draft == family)

    def layer_names(self) -> set[str]:
        """Every decoder-layer name any draft of the release accepts."""
        return {n for a in self.architectures.values() for n in a.layer_names}


def _key(version: str) -> tuple[int, ...]:
    return tuple(int(n) for n in re.findall(r"\d+", version))


@cache
def shipped_registry_versions() -> list[str]:
    names = [p.name for p in package_files(CATALOG_PACKAGE).iterdir()]
    found = [n[len(PREFIX) : -len(SUFFIX)] for n in names if n.startswith(PREFIX)]
    return sorted(found, key=_key)


@cache
def load_model_registry(version: str | None = None) -> ModelRegistry | None:
    """The registry of `version` (else the nearest older shipped one), None if none is."""
    versions = shipped_registry_versions()
    older = [v for v in versions if version is None or _key(v) <= _key(version)]
    if not older:
        return None
    chosen = older[-1]
    path = package_files(CATALOG_PACKAGE).joinpath(f"{PREFIX}{chosen}{SUFFIX}")
    try:
        data = json.loads(path.read_text("utf-8"))
    except (OSError, ValueError):
        return None
    architectures = {
        name: Architecture(
            name,
            entry["module"],
            entry.get("draft"),
            tuple(entry.get("asserts", ())),
            tuple(entry.get("layer_names", ())),
        )
        for name, entry in data["files"].items()
    }
    return ModelRegistry(chosen, architectures)

"""SGLang's flag catalog: what the server's argument parser really accepts.

The catalog is generated from SGLang's own parser (see analyzer/sglang/catalog_build.py)
and shipped as JSON, so every flag that advice names is one that exists. The
lookups here mirror argparse: aliases share one option, and unambiguous
prefixes of a long option are silently expanded.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache, cached_property
from pathlib import Path
from typing import Any

from analyzer.core import bounded_json
from analyzer.core.package_files import package_files
from analyzer.core.parse_cache import cached

CATALOG_PACKAGE = "analyzer.catalogs"
MAX_RESOLVED = 10_000  # typed flags remembered per catalog (a huge input types many)
SAME_WORD = 0.75  # two words of flags this alike are one misspelt (`statc`, `static`)


class CatalogError(Exception):
    """A catalog that cannot be found or read."""


@dataclass(frozen=True)
class FlagSpec:
    """One argparse option of SGLang's server."""

    option_strings: tuple[str, ...]
    dest: str
    type: str | None
    choices: tuple[Any, ...] | None
    default: Any
    nargs: Any
    required: bool
    action: str
    help: str

    @property
    def long(self) -> str:
        """The canonical spelling: the first long option string."""
        return next((o for o in self.option_strings if o.startswith("--")), self.option_strings[0])

    @property
    def takes_value(self) -> bool:
        """False for switches; SGLang's own action classes are switches when nargs is 0."""
        if self.nargs == 0:
            return False
        return self.action not in ("store_true", "store_false", "store_const", "count", "help")


@dataclass(frozen=True)
class Resolution:
    """How argparse would read a typed flag: exact, alias, prefix, ambiguous or unknown."""

    typed: str
    kind: str
    spec: FlagSpec | None = None
    candidates: tuple[str, ...] = ()


class FlagCatalog:
    """Lookups over one SGLang version's options."""

    def __init__(
        self,
        data: dict[str, Any] | None = None,
        version: str | None = None,
        read: Callable[[], tuple[dict[str, Any], tuple[FlagSpec, ...]]] | None = None,
    ) -> None:
        """From the catalog's JSON `data`, or lazily: `version` now, `read()` giving the
        JSON and its FlagSpecs on first use of anything else (version detection names every
        shipped release, and most inputs need only one or two of them read)."""
        self._data = data
        self._read = read
        self.version: str = version or (data or {}).get("sglang_version", "unknown")

    @cached_property
    def _parsed(self) -> tuple[dict[str, Any], tuple[FlagSpec, ...]]:
        if self._data is not None:
            return self._data, tuple(_spec(o) for o in self._data["options"])
        assert self._read is not None, "a catalog needs its data or a reader"
        return self._read()

    @cached_property
    def data(self) -> dict[str, Any]:
        return self._parsed[0]

    @property
    def from_usage(self) -> bool:
        """Read from the usage text the user's SGLang printed (analyzer/sglang/usage_text.py),
        not shipped: its options are exactly the user's release's, its `version` the
        shipped catalog that filled in types and help."""
        return self._data is not None and "usage_prog" in self._data

    @property
    def release(self) -> str:
        """The release these options are, as a sentence names it."""
        if self.from_usage:
            return "the SGLang whose usage text the input shows"
        return f"sglang {self.version}"

    @cached_property
    def built(self) -> str | None:
        return self.data.get("built")

    @cached_property
    def source_lines(self) -> dict[str, dict[str, str]]:
        """Function name -> "first-last ..." line ranges per fingerprint file (catalog_build.py)."""
        return self.data.get("source_lines", {})

    @cached_property
    def allow_abbrev(self) -> bool:
        return bool(self.data.get("allow_abbrev", True))

    @cached_property
    def specs(self) -> tuple[FlagSpec, ...]:
        return self._parsed[1]

    @cached_property
    def _by_option(self) -> dict[str, FlagSpec]:
        return {o: s for s in self.specs for o in s.option_strings}

    @cached_property
    def _by_dest(self) -> dict[str, FlagSpec]:
        return {s.dest: s for s in self.specs}

    @cached_property
    def _long_options(self) -> list[str]:
        return sorted(o for o in self._by_option if o.startswith("--"))

    @cached_property
    def _resolved(self) -> dict[str, Resolution]:
        return {}

    def resolve(self, typed: str) -> Resolution:
        """Resolve a typed flag (`--tp`, `--tensor-parallel-size`) the way argparse does."""
        found = self._resolved.get(typed)
        if found is None:  # the same flags are resolved many times a run: once each
            found = self._resolve(typed)
            if len(self._resolved) < MAX_RESOLVED:
                self._resolved[typed] = found
        return found

    def _resolve(self, typed: str) -> Resolution:
        flag = typed.split("=", 1)[0]
        spec = self._by_option.get(flag)
        if spec is not None:
            return Resolution(typed, "exact" if flag == spec.long else "alias", spec)
        if self.allow_abbrev and flag.startswith("--") and len(flag) > 2:
            matches = [o for o in self._long_options if o.startswith(flag)]
            owners = {self._by_option[o].dest for o in matches}
            if len(owners) == 1:
                return Resolution(typed, "prefix", self._by_option[matches[0]], tuple(matches))
            if len(owners) > 1:
                return Resolution(typed, "ambiguous", None, tuple(matches))
        return Resolution(typed, "unknown")

    def canonical(self, typed: str) -> str | None:
        """SGLang's long option for a typed flag, or None if argparse would reject it."""
        spec = self.resolve(typed).spec
        return spec.long if spec else None

    def spec(self, flag: str) -> FlagSpec | None:
        return self.resolve(flag).spec

    def by_dest(self, dest: str) -> FlagSpec | None:
        """The option for a ServerArgs field name such as `speculative_eagle_topk`."""
        return self._by_dest.get(dest)

    def spellings(self, dest: str) -> list[str]:
        """Every option string that sets `dest` (a rename often kept the old one a while)."""
        return [o for s in self.specs if s.dest == dest for o in s.option_strings]

    def takes_value(self, typed: str) -> bool | None:
        spec = self.spec(typed)
        return spec.takes_value if spec else None

    def check_value(self, flag: str, value: str | None) -> str | None:
        """Why argparse would reject `value` for `flag`, or None when it accepts it."""
        spec = self.spec(flag)
        if spec is None:
            return f"{flag} is not an option of {self.release}"
        if not spec.takes_value:
            return f"{spec.long} takes no value" if value is not None else None
        if value is None:
            return f"{spec.long} expects a value"
        if spec.type in ("int", "float"):
            try:
                (int if spec.type == "int" else float)(value)
            except ValueError:
                return f"{spec.long} expects {spec.type}, got {value!r}"
        if spec.choices and not _in_choices(value, spec):
            return f"{spec.long} must be one of {', '.join(map(str, spec.choices))}"
        return None

    def similar(self, typed: str, limit: int = 3) -> list[tuple[str, float]]:
        """Closest long options by name, scored 0..1, best first."""
        words = _words(typed)
        scored = []
        for option in self._long_options:
            score = difflib.SequenceMatcher(None, typed.lstrip("-"), option[2:]).ratio()
            overlap = len(words & _words(option)) / max(len(words | _words(option)), 1)
            scored.append((option, round(max(score, (score + overlap) / 2 + overlap / 4), 3)))
        scored.sort(key=lambda item: (-item[1], item[0]))
        return scored[:limit]


def _in_choices(value: str, spec: FlagSpec) -> bool:
    converters = {"int": int, "float": float}
    try:
        typed = converters.get(spec.type or "", str)(value)
    except ValueError:
        return False
    return typed in spec.choices or value in map(str, spec.choices or ())


def swaps_a_word(typed: str, option: str) -> bool:
    """A word of each flag that the other lacks: a different option, not a misspelling of
    it (`--enable-flashinfer-mla` is not `--enable-linker-mla-dedup`). A typo, a cut or an
    added or dropped word (`--quantization-method`: `--quantization`) leaves one side whole."""
    ours, theirs = _words(typed), _words(option)
    return bool(_uncovered(ours, theirs)) and bool(_uncovered(theirs, ours))


def _uncovered(words: set[str], others: set[str]) -> list[str]:
    return [w for w in words if not any(_same_word(w, o) for o in others)]


def _same_word(a: str, b: str) -> bool:
    short, long = sorted((a, b), key=len)
    if short == long or (len(short) >= 3 and long.startswith(short)):
        return True
    return difflib.SequenceMatcher(None, a, b).ratio() >= SAME_WORD


def _words(flag: str) -> set[str]:
    return {w for w in re.split(r"[-_]+", flag.lower()) if w}


def _spec(option: dict[str, Any]) -> FlagSpec:
    choices = option.get("choices")
    return FlagSpec(
        option_strings=tuple(option["option_strings"]),
        dest=option["dest"],
        type=option.get("type"),
        choices=tuple(choices) if choices is not None else None,
        default=option.get("default"),
        nargs=option.get("nargs"),
        required=bool(option.get("required", False)),
        action=option.get("action", "store"),
        help=option.get("help") or "",
    )


def version_key(version: str) -> tuple[int, ...]:
    """Sort key for SGLang versions: 0.5.6 < 0.5.6.post2 < 0.5.10."""
    return tuple(int(n) for n in re.findall(r"\d+", version))


@cache
def shipped_versions() -> list[str]:
    """Versions of the catalogs shipped in the package, oldest first."""
    names = [p.name for p in package_files(CATALOG_PACKAGE).iterdir()]
    versions = [n[len("sglang-") : -len(".json")] for n in names if n.startswith("sglang-")]
    return sorted(versions, key=version_key)


def nearest_shipped(version: str) -> str:
    """The shipped catalog for `version`: its own, else the newest older one (flags are
    added far more often than removed), else the oldest shipped."""
    versions = shipped_versions()
    if not versions:
        raise CatalogError("no flag catalog is shipped in this package")
    if version in versions:
        return version
    older = [v for v in versions if version_key(v) <= version_key(version)]
    return older[-1] if older else versions[0]


def all_catalogs() -> list[FlagCatalog]:
    """Every shipped catalog, oldest first (flag history and version detection)."""
    return [load_catalog(version) for version in shipped_versions()]


def load_catalog(version: str | None = None) -> FlagCatalog:
    """The shipped catalog of `version`, or of the newest shipped SGLang (read on first use)."""
    versions = shipped_versions()
    if not versions:
        raise CatalogError("no flag catalog is shipped in this package")
    chosen = version or versions[-1]
    if chosen not in versions:
        raise CatalogError(f"no catalog for sglang {chosen} (shipped: {', '.join(versions)})")
    return _shipped_catalog(chosen)


@cache
def _shipped_catalog(version: str) -> FlagCatalog:
    return FlagCatalog(version=version, read=lambda: _read_shipped(version))


def _read_shipped(version: str) -> tuple[dict[str, Any], tuple[FlagSpec, ...]]:
    return _all_shipped()[version]


@cache
def _all_shipped() -> dict[str, tuple[dict[str, Any], tuple[FlagSpec, ...]]]:
    """Every shipped catalog's JSON and FlagSpecs, kept between runs (core/parse_cache.py)
    in one file: version detection reads them all, and two thirds of the options are the
    same in each release, stored once. The options are kept as FlagSpecs only (their JSON
    was as much again to unpickle)."""
    folder = package_files(CATALOG_PACKAGE)
    paths = {v: folder.joinpath(f"sglang-{v}.json") for v in shipped_versions()}
    return cached("flags", [*paths.values(), Path(__file__)], lambda: _parse_all(paths))


def _parse_all(paths: dict[str, Any]) -> dict[str, tuple[dict[str, Any], tuple[FlagSpec, ...]]]:
    specs: dict[str, FlagSpec] = {}  # one object per distinct option (pickled once)
    parsed = {}
    for version, path in paths.items():
        try:
            data = bounded_json.loads(path.read_text("utf-8"))
            found = []
            for option in data.pop("options"):
                key = json.dumps(option, sort_keys=True)
                if key not in specs:
                    specs[key] = _spec(option)
                found.append(specs[key])
        except (OSError, ValueError, KeyError) as exc:
            raise CatalogError(f"cannot read the flag catalog of sglang {version}: {exc}") from None
        parsed[version] = (data, tuple(found))
    return parsed

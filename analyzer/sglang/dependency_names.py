"""Which package defines a name SGLang imports: `catalogs/dependency_names.json`, built by
analyzer/sglang/dependency_names_build.py from the shipped releases' `from PACKAGE import NAME`
(and `as ALIAS`), with the names SGLang binds only when a guarded import of one ran.
"""

from __future__ import annotations

from functools import cache

from analyzer.core import bounded_json
from analyzer.core.package_files import package_files

CATALOG_PACKAGE, CATALOG_FILE = "analyzer.catalogs", "dependency_names.json"


@cache
def _catalog() -> dict:
    text = (package_files(CATALOG_PACKAGE) / CATALOG_FILE).read_text(encoding="utf-8")
    return bounded_json.loads(text)


@cache
def _names() -> dict[str, tuple[str, ...]]:
    return {name: tuple(tops) for name, tops in _catalog()["names"].items()}


def packages_defining(name: str) -> tuple[str, ...]:
    """The dependency packages SGLang imports `name` from (empty: none of them)."""
    return _names().get(name, ())


@cache
def dependency_modules() -> frozenset[str]:
    """Every top-level module SGLang imports names from among its dependencies."""
    return frozenset(top for tops in _names().values() for top in tops)


@cache
def _guarded() -> frozenset[str]:
    return frozenset(_catalog().get("guarded", ()))


def guarded_import_packages(name: str) -> tuple[str, ...]:
    """The packages of a name SGLang binds only under an `if` / `try` of a module (a skipped
    import leaves it undefined), never by its own code (empty: not such a name)."""
    return packages_defining(name) if name in _guarded() else ()

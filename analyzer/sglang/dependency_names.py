"""Which package defines a name SGLang imports: `catalogs/dependency_names.json`, built by
analyzer/sglang/dependency_names_build.py from the shipped releases' `from PACKAGE import NAME`.
"""

from __future__ import annotations

from functools import cache

from analyzer.core import bounded_json
from analyzer.core.package_files import package_files

CATALOG_PACKAGE, CATALOG_FILE = "analyzer.catalogs", "dependency_names.json"


@cache
def _names() -> dict[str, tuple[str, ...]]:
    text = (package_files(CATALOG_PACKAGE) / CATALOG_FILE).read_text(encoding="utf-8")
    return {name: tuple(tops) for name, tops in bounded_json.loads(text)["names"].items()}


def packages_defining(name: str) -> tuple[str, ...]:
    """The dependency packages SGLang imports `name` from (empty: none of them)."""
    return _names().get(name, ())


@cache
def dependency_modules() -> frozenset[str]:
    """Every top-level module SGLang imports names from among its dependencies."""
    return frozenset(top for tops in _names().values() for top in tops)

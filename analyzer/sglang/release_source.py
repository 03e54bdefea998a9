"""Where an installed SGLang release's source is, and which version it is, found without
importing it (the error catalog is mined from the files, so a release that cannot import
here can still be read)."""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any


def locate_package(python: str | None = None) -> Path:
    """The `sglang` package folder the given Python (with this environment's PYTHONPATH)
    would import, found without importing it."""
    code = (
        "import importlib.util as u; s = u.find_spec('sglang'); "
        "print(list(s.submodule_search_locations)[0] if s else '')"
    )
    if python is None:
        spec = importlib.util.find_spec("sglang")
        found = list(spec.submodule_search_locations or [])[0] if spec else ""
    else:
        out = subprocess.run([python, "-c", code], capture_output=True, text=True, timeout=60)
        found = out.stdout.strip()
    if not found:
        raise FileNotFoundError(f"no sglang package for {python or sys.executable}")
    return Path(found)


def package_version(package: Path) -> str:
    """The release's version: its dist-info next to it, else `__version__` in its source."""
    infos = sorted(package.parent.glob("sglang-*.dist-info"))
    if len(infos) == 1:
        return infos[0].name[len("sglang-") : -len(".dist-info")]
    for name in ("_version.py", "version.py"):
        path = package / name
        if path.is_file():
            found = re.search(
                r"__version__\s*(?::\s*\w+\s*)?=\s*['\"]([^'\"]+)", path.read_text("utf-8")
            )
            if found:
                return found.group(1)
    raise ValueError(f"cannot tell the sglang version of {package}")


@dataclass(frozen=True)
class SourceMiner:
    """One catalog mined from a release's files (`PREFIX-VERSION.json`), with the flag
    catalog of that release mapping server-argument fields to flags."""

    name: str  # the module, for the command line and its messages
    description: str
    prefix: str  # `errors-`, `paths-`
    counted: str  # what the count of entries counts
    write: Callable[[str | os.PathLike[str], Path, dict[str, Any]], int]

    def write_beside(self, flag_catalog_path: str | os.PathLike[str]) -> tuple[Path, int]:
        """After `catalog build -o F`: mine the same (importable) sglang into
        `PREFIX-VERSION.json` next to F, flags mapped through the catalog just written."""
        flags = json.loads(Path(flag_catalog_path).read_text(encoding="utf-8"))
        package = locate_package()
        path = Path(flag_catalog_path).parent / f"{self.prefix}{package_version(package)}.json"
        return path, self.write(path, package, flags)

    def main(self, argv: Sequence[str] | None = None) -> int:
        """`python -m analyzer.sglang.NAME [-o FILE] [--python PY | --package-dir DIR]`."""
        from analyzer.core.output import OutputError

        cli = argparse.ArgumentParser(prog=f"python -m {self.name}", description=self.description)
        cli.add_argument(
            "-o", "--output", help=f"default: analyzer/catalogs/{self.prefix}VERSION.json"
        )
        cli.add_argument("--python", help="the Python whose sglang to mine (PYTHONPATH applies)")
        cli.add_argument("--package-dir", type=Path, help="an sglang package folder to mine")
        cli.add_argument(
            "--flag-catalog", type=Path, help="default: the shipped one of the release"
        )
        args = cli.parse_args(list(argv) if argv is not None else None)
        short = self.name.rsplit(".", 1)[-1]
        try:
            package = args.package_dir or locate_package(args.python)
            version = package_version(package)
            if args.flag_catalog:
                flags = json.loads(args.flag_catalog.read_text(encoding="utf-8"))
            else:
                flags = flag_catalog_data(version)
        except (OSError, ValueError, subprocess.SubprocessError) as exc:
            print(f"{short}: {exc}", file=sys.stderr)
            return 2
        default = Path(__file__).parent.parent / "catalogs" / f"{self.prefix}{version}.json"
        output = args.output or str(default)
        try:
            count = self.write(output, package, flags)
        except OutputError as exc:
            print(f"{short}: {exc}", file=sys.stderr)
            return 2
        print(f"wrote {output} ({count} {self.counted}, sglang {version})")
        return 0


def flag_catalog_data(version: str) -> dict[str, Any]:
    """The shipped flag catalog of `version`, as JSON data."""
    from analyzer.core.package_files import package_files

    text = package_files("analyzer.catalogs").joinpath(f"sglang-{version}.json").read_text("utf-8")
    return json.loads(text)

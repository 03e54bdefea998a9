"""Where an installed SGLang release's source is, and which version it is, found without
importing it (the error catalog is mined from the files, so a release that cannot import
here can still be read)."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from pathlib import Path


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

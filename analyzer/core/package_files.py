"""Where a package's data files are (the rules, the catalogs).

importlib.resources took 5 ms to import, as long as reading the data it found: a package
installed as files (a wheel, an editable checkout) is simply the folder of its
__init__.py. Only a package inside a zip needs importlib.resources, and gets it.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any


def package_files(package: str) -> Any:
    """The folder of `package` (a Path), or its importlib.resources Traversable in a zip."""
    file = getattr(importlib.import_module(package), "__file__", None)
    if file:
        folder = Path(file).parent
        if folder.is_dir():
            return folder
    from importlib import resources

    return resources.files(package)

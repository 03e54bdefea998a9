"""Every fix function a rule can name with `fix = "..."`, by name: one registry for the
fixes of failures (fixes.py, check_fixes.py, json_fixes.py, path_fixes.py) and of silent misconfigurations (intent_fixes.py)."""

from __future__ import annotations

from collections.abc import Callable

from analyzer.core.model import Finding
from analyzer.repair.check_fixes import CHECK_FIXES
from analyzer.repair.fixes import FLAG_FIXES, FixContext, FixPlan
from analyzer.repair.intent_fixes import INTENT_FIXES
from analyzer.repair.json_fixes import JSON_FIXES
from analyzer.repair.path_fixes import PATH_FIXES

FIXES: dict[str, Callable[[Finding, FixContext], FixPlan]] = {
    **FLAG_FIXES,
    **CHECK_FIXES,
    **JSON_FIXES,
    **PATH_FIXES,
    **INTENT_FIXES,
}

"""The pre-flight: one check of a launch command and its model folders before anything starts
(`loganalyze run`, `loganalyze verify`, the GitHub Action's check step, the MCP `preflight`
tool). `preflight(command, cwd, use_sglang) -> PreflightReport`; `report.as_json()`."""

from analyzer.preflight.check import preflight
from analyzer.preflight.report import PreflightReport, Problem, render_report, render_text

__all__ = ["PreflightReport", "Problem", "preflight", "render_report", "render_text"]

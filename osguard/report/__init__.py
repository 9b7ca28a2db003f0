"""osguard.report: execution reports (Markdown, HTML with plots) and the episode viewer.

Reads run directories written by ``osguard.runner`` (format in docs/execution.md).
"""

from osguard.report.load import ReportError, Run, load_run
from osguard.report.metrics import Overhead, Rates, Transitions, overhead, rates, rates_by, transitions
from osguard.report.render import render_html, render_markdown, report_data, report_json
from osguard.report.viewer import write_viewer

__all__ = [
    "Overhead",
    "Rates",
    "ReportError",
    "Run",
    "Transitions",
    "load_run",
    "overhead",
    "rates",
    "rates_by",
    "render_html",
    "render_markdown",
    "report_data",
    "report_json",
    "transitions",
    "write_viewer",
]

"""The report face: a static HTML site of the runs, and the export of one run, by nbconvert."""

from .site import ReportSummary, build_report, default_out, export_run, render_run_page

__all__ = ["ReportSummary", "build_report", "default_out", "export_run", "render_run_page"]

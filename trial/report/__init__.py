"""Views of a trial log: metrics.json (docs/METRICS.md) and topdown.png, rebuilt from the log alone
(``hil report DIR``), so a metric can be fixed later and old trials re-scored.

    metrics.py    compute_metrics: a pure function of the log's messages
    topdown.py    the top-down picture (png.py: a small PNG writer)
    build.py      build_report: DIR/trial.mcap -> DIR/metrics.json + DIR/topdown.png; the `hil report` command
"""
from .build import METRICS_NAME, TOPDOWN_NAME, build_report, format_metrics

__all__ = ["METRICS_NAME", "TOPDOWN_NAME", "build_report", "format_metrics"]

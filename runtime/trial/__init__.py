"""Trial recording and reporting: the MCAP log, metrics, the top-down picture (issue 7, items 4 and 5).

Independent of the crowd and the world: a trial runner writes messages through :class:`TrialRecorder`;
``hil report DIR`` (or :func:`build_report`) turns ``DIR/trial.mcap`` into ``metrics.json`` and ``topdown.png``.
"""
from .log import LogMessage, TrialLog, read_log
from .recorder import TrialRecorder

__all__ = ["LogMessage", "TrialLog", "TrialRecorder", "read_log"]

"""The trial log: one MCAP file per trial, JSON messages with schemas, readable after a crash.

    recorder.py   TrialRecorder: the MCAP writer (flushes every second of log time: survives SIGKILL)
    tick_log.py   TickLog: what a trial writes after every bus cycle (robot, sensors, people, contacts, script)
    topics.py     the topics and their JSON schemas
    log.py        read_log: the reader, which reads a log without its footer as far as it goes
"""
from .log import LogMessage, TrialLog, read_log
from .recorder import TrialRecorder

__all__ = ["LogMessage", "TrialLog", "TrialRecorder", "read_log"]

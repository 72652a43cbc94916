"""Ctrl-C (a real SIGINT to this process) during a trial: taken where the trial can stop with its log complete.

The signal is raised from inside the trial at a chosen moment (a log listener sees each message as it is
written), so the moment is exact: while the log's first records are written, where an interrupt used to leave a
log with no footer, and in the controller's loop, where it always stopped the run.
"""
from __future__ import annotations

import signal
import textwrap
import threading

import pytest

from hil.trial import Trial
from hil.trial.record.log import read_log

STEADY = textwrap.dedent('''\
    def main(robot):
        for tick in robot.loop(hz=10):
            robot.base.drive(0.2, 0.0)
''')


def _trial(tmp_path):
    (tmp_path / "steady.py").write_text(STEADY)
    return Trial(tmp_path / "steady.py", map="lab", start=(0, 0, 0), duration=5.0)


def _interrupt_at(topic: str, times: int = 1):
    """A log listener that raises SIGINT in this process when ``topic`` is first written (``times`` signals)."""
    fired = []

    def listener(written: str, t: float, payload) -> None:
        if written == topic and not fired:
            fired.append(t)
            for _ in range(times):
                signal.raise_signal(signal.SIGINT)
    return listener, fired


def test_ctrl_c_while_the_log_starts_is_held_and_the_trial_stops_with_its_log_complete(tmp_path, capsys):
    assert threading.current_thread() is threading.main_thread()
    before = signal.getsignal(signal.SIGINT)
    listener, fired = _interrupt_at("/trial/meta")  # the log's first record, inside its start
    result = _trial(tmp_path).run(tmp_path / "t", listeners=(listener,))
    assert fired == [0.0]
    assert result.status == "interrupted" and result.error is None, (result.status, result.error)
    assert result.sim_s < 0.5, "the controller's loop ended at once"
    log = read_log(tmp_path / "t" / "trial.mcap")
    assert log.complete, "the log has its footer"
    assert "Ctrl-C again: at once" in capsys.readouterr().err
    assert signal.getsignal(signal.SIGINT) is before, "the handler before the trial is back"


def test_ctrl_c_in_the_controllers_loop_stops_it_as_before(tmp_path):
    listener, fired = _interrupt_at("/robot/state")
    result = _trial(tmp_path).run(tmp_path / "t", listeners=(listener,))
    assert fired and result.status == "interrupted" and result.sim_s < 5.0
    assert read_log(tmp_path / "t" / "trial.mcap").complete


def test_ctrl_c_twice_while_the_log_starts_stops_at_once(tmp_path):
    before = signal.getsignal(signal.SIGINT)
    listener, fired = _interrupt_at("/trial/meta", times=2)
    with pytest.raises(KeyboardInterrupt):
        _trial(tmp_path).run(tmp_path / "t", listeners=(listener,))
    assert fired == [0.0]
    assert signal.getsignal(signal.SIGINT) is before


def test_a_process_that_ignores_ctrl_c_keeps_ignoring_it_through_a_trial(tmp_path):
    """A sweep's trial process ignores SIGINT (its engine handles Ctrl-C): a trial there must not take it back."""
    before = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        listener, fired = _interrupt_at("/trial/meta")
        result = _trial(tmp_path).run(tmp_path / "t", listeners=(listener,))
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, before)
    assert fired == [0.0] and result.status == "ok", "the ignored Ctrl-C changed nothing: the trial ran to its end"

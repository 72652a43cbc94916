"""Where a trial run (trial/run.py) meets its states: checked before anything starts, restored after the robot
opens, saved while it runs. Kept here so that run.py only calls in."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from .resume import Plan, ResumeError, check, plan, restore


def prepare(spec: Any) -> Plan | None:
    """The state ``from:`` names, found and its time checked against the log (ResumeError), or None."""
    if not spec.resume_from:
        return None
    if (spec.clock or "sim") != "sim" or spec.profile is not None:
        raise ResumeError(f"--from {spec.resume_from}: a trial starts from a state only with the virtual robot on "
                          "the sim clock (robot:, clock: sim)")
    return plan(spec.resume_from)


def start(spec: Any, task: Any, robot: Any, probe: Any, folder: Path | None, resume: Plan | None,
          task_state) -> tuple[Any, float]:
    """Restore ``resume`` into the opened robot and start saving into ``folder`` (when recorded, with an in-process
    world on the sim clock). Returns (the saver or None, the trial time the run starts at)."""
    from .files import fingerprint
    from .manifest import trial_fingerprint
    from .saver import StateSaver

    embodied = probe.embodied if probe is not None else None
    here = fingerprint(spec, task, embodied) if embodied is not None else None
    ticks: list = []
    t_start = 0.0
    if resume is not None and getattr(spec, "crowd_pipeline", False):
        raise ResumeError(f"--from {spec.resume_from}: a pipelined crowd (crowd_pipeline: true) has a tick in flight "
                          "that no state holds; resume without crowd_pipeline")
    if resume is not None:
        if embodied is None:
            raise ResumeError(f"--from {spec.resume_from}: this trial has no in-process world to restore into")
        check(resume, here, spec.seed)
        ticks = restore(resume, robot, embodied)
        robot.mark_resumed(resume.describe())
        t_start = resume.t
    saver = None
    pipelined = getattr(spec, "crowd_pipeline", False)  # a tick in flight: the crowd cannot be asked for its state
    if folder is not None and embodied is not None and spec.state_every and robot.clock.kind == "sim" \
            and not pipelined:
        from ..spec import trial_kwargs

        saver = StateSaver(folder, robot, embodied, here, every_s=spec.state_every, task_state=task_state,
                           resumed=robot.resumed_from,
                           roundtrip_start=resume is None or abs(resume.t - resume.state_t) < 1e-9,
                           trial=trial_fingerprint(spec))
        if not callable(spec.controller) or isinstance(spec.controller, (str, Path)):
            saver.index["trial"] = trial_kwargs(spec)
        if resume is not None:
            saver.preload([], ticks + _ticks_since(resume))
        saver.attach()
    return saver, t_start


def spec_from_state(controller: Any, **keys: Any) -> Any:
    """``hil trial CONTROLLER --from DIR@S``: the trial DIR ran (its keys, from the folder's manifest), with
    another controller and the keys given on top."""
    from ..spec import make_spec
    from . import files
    from .manifest import Manifest
    from .resume import parse

    text = keys["resume_from"]
    folder, _ = parse(text)
    try:
        original = dict(Manifest.load(folder / files.STATES).doc.get("keys") or {})
    except files.StatesError as exc:
        raise ResumeError(f"--from {text}: {exc}") from None
    original.pop("controller", None)
    original.pop("resume_from", None)
    return make_spec(controller, source="hil trial", **{**original, **keys})


def _ticks_since(resume: Plan) -> list:
    """The crowd ticks the re-simulation sent after the state (journaled by the original, sent again here)."""
    return [tick for tick in resume.ticks[resume.state["crowd_ticks"]:] if tick[0] < resume.t - 1e-9]


__all__ = ["prepare", "start", "ResumeError"]

"""``hil view [DIR|trial.mcap]`` and the ``--view`` option of ``hil trial``, ``hil demo`` and ``hil run``."""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

VIEW_DESCRIPTION = """\
The trial viewer in your browser (the crowd-simulation reference's display): the 3D scene (walls, the robot from its
parts, people coloured by what they do, the ring's rays, goal, paths), the time and real-time factor, the people, the
scenario's lines with the one running highlighted, the controller's mode, the metrics at the end.

  hil view trials/demo-0            # replay a trial folder (or a trial.mcap): play, pause, scrub, speed
  hil view                          # run trials from the page: pick map, scenario and seed, press Run
  hil demo --view                   # watch a trial live: pause / step / resume it on the simulator's clock

The page is served on loopback (127.0.0.1) unless --host says otherwise; open the URL it prints."""


def register(sub) -> None:
    view = sub.add_parser("view", help="the trial viewer in a browser: replay a trial, or run trials from the page",
                          description=VIEW_DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    view.add_argument("log", nargs="?", help="a trial folder or its trial.mcap (none: an empty page to run from)")
    add_view_arguments(view, flag=False)
    view.add_argument("--out", default="trials/view", help="where trials run from the page write (trials/view)")
    from hil.trial.foxglove_live.cli import add_foxglove_arguments

    add_foxglove_arguments(view, replay=True)
    view.set_defaults(func=cmd_view)


def add_view_arguments(parser: argparse.ArgumentParser, *, flag: bool = True) -> None:
    group = parser.add_argument_group("the viewer")
    if flag:
        group.add_argument("--view", action="store_true", help="watch it live in the browser (hil view)")
        group.add_argument("--view-paused", action="store_true",
                           help="start paused (sim clock): press Resume or Step on the page")
        group.add_argument("--view-linger", type=float, metavar="S",
                           help="keep the page up S seconds after the trial ends (default: until Ctrl-C)")
    prefix = "--view-" if flag else "--"
    group.add_argument(f"{prefix}host", dest="view_host", default="127.0.0.1",
                       help="address the page is served on (default loopback 127.0.0.1)")
    group.add_argument(f"{prefix}port", dest="view_port", type=int, default=8080,
                       help="port of the page (default 8080; 0: any free port)")


def open_viewer(args: argparse.Namespace, run_spec: Any = None, out_root: str = "trials/view"):
    from .app import Viewer

    try:
        viewer = Viewer(args.view_host, args.view_port, run_spec=run_spec, out_root=out_root)
    except ImportError as exc:
        raise ValueError(f"the viewer needs viser ({exc}); pip install 'hil[view]'") from None
    print(f"viewer: open {viewer.url} in a browser (serving on {args.view_host}; Ctrl-C to stop)", flush=True)
    return viewer


def cmd_view(args: argparse.Namespace) -> int:
    from hil.trial.presets import demo_spec

    from .timeline import Timeline

    if getattr(args, "foxglove", None) is not None:
        return _serve_foxglove(args)
    timeline = metrics = None
    if args.log:
        path = Path(args.log)
        if not path.exists():
            raise ValueError(f"{path}: no such trial folder or log")
        timeline = Timeline.from_log(path)
        metrics = _metrics_of(path)
    viewer = open_viewer(args, run_spec=demo_spec(), out_root=args.out)
    if timeline is not None:
        viewer.show_replay(timeline, metrics, folder=path if path.is_dir() else path.parent)
        failure = (metrics or {}).get("failure") if isinstance(metrics, dict) else None
        why = f"; failed: {failure['cause']}" if isinstance(failure, dict) and failure.get("cause") else ""
        print(f"viewer: replaying {args.log} ({timeline.end_t:.1f} s){why}", flush=True)
    return _serve(viewer, None)


def _serve_foxglove(args: argparse.Namespace) -> int:
    """``hil view DIR --foxglove``: the recorded trial served to Foxglove (seek, play, speed), no page."""
    from hil.trial.foxglove_live.address import parse_address
    from hil.trial.foxglove_live.cli import gate_options
    from hil.trial.foxglove_live.replay import ReplayServer

    if not args.log:
        raise ValueError("hil view --foxglove needs a trial folder or its trial.mcap to replay")
    path = Path(args.log)
    if not path.exists():
        raise ValueError(f"{path}: no such trial folder or log")
    host, port = parse_address(args.foxglove)
    server = ReplayServer(path, host, port, **gate_options(args))
    print(f"foxglove: replaying {server.path} ({(server.end_ns - server.start_ns) / 1e9:.1f} s) at {server.url} "
          f"(Foxglove: Open connection -> Foxglove WebSocket; Ctrl-C to stop)", flush=True)
    return _serve(server, None)


def _metrics_of(path: Path) -> dict[str, Any] | None:
    import json

    folder = path if path.is_dir() else path.parent
    metrics = folder / "metrics.json"
    if metrics.exists():
        return json.loads(metrics.read_text(encoding="utf-8"))
    try:
        from hil.trial.record.log import read_log
        from hil.trial.report.metrics import compute_metrics

        return compute_metrics(read_log(path if path.is_file() else folder / "trial.mcap"))
    except Exception:  # noqa: BLE001 - a log too short to score: the page says "when the run ends"
        return None


def run_viewed(trial: Any, out: Path, args: argparse.Namespace, progress=None, taps: tuple = (),
               hooks: tuple = ()):
    """Run ``trial`` with the page attached (``--view``); the page stays up after it ends (``--view-linger``).

    The page is served from a child process (trial/view/remote.py) so that watching does not slow the trial."""
    from .remote import ViewerProcess

    viewer = ViewerProcess(args.view_host, args.view_port, run_spec=trial.spec, out_root=str(out.parent),
                           label=trial.spec.label, start_paused=args.view_paused)
    print(f"viewer: open {viewer.url} in a browser (serving on {args.view_host}; Ctrl-C to stop)", flush=True)
    try:
        result = trial.run(out, progress=progress, listeners=viewer.listeners, hooks=(*viewer.hooks, *hooks),
                           taps=(*viewer.taps, *taps))
        viewer.finish(result, result.error)
    except BaseException:
        viewer.finish(None, "interrupted")
        viewer.close()
        raise
    return result, viewer


def linger(viewer: Any, seconds: float | None) -> None:
    """Keep the page up after the trial: ``seconds`` (None: until Ctrl-C)."""
    print(f"viewer: the trial has ended; the page stays at {viewer.url} "
          + (f"for {seconds:g} s" if seconds is not None else "until Ctrl-C"), flush=True)
    _serve(viewer, seconds)


def _serve(viewer: Any, seconds: float | None) -> int:
    end = None if seconds is None else time.monotonic() + seconds
    try:
        while end is None or time.monotonic() < end:
            time.sleep(0.2)
    except KeyboardInterrupt:
        print("", file=sys.stderr)
    finally:
        viewer.close()
    return 0

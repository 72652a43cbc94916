"""``--foxglove [HOST:]PORT`` on ``hil trial``, ``hil demo``, ``hil run`` (and ``hil view DIR``), and
``hil foxglove-layout``."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from .address import DEFAULT_PORT


def add_foxglove_arguments(parser: argparse.ArgumentParser, *, replay: bool = False) -> None:
    group = parser.add_argument_group("Foxglove")
    what = "serve the recorded trial to Foxglove, with seek, play and speed" if replay else \
        "serve the trial live to Foxglove (its channels, the simulator's time; pause, resume, step, parameters)"
    group.add_argument("--foxglove", nargs="?", const="", default=None, metavar="[HOST:]PORT",
                       help=f"{what}: a foxglove-sdk WebSocket server on loopback port {DEFAULT_PORT} unless "
                            "given (0: any free port); open it in Foxglove: Open connection -> Foxglove WebSocket")
    group.add_argument("--foxglove-origin", action="append", default=[], metavar="ORIGIN",
                       help="also admit web pages from ORIGIN (e.g. https://lichtblick.example.org; repeat for more). "
                            "Admitted by default: Foxglove's app (https://app.foxglove.dev), the desktop apps "
                            "(file://) and hil view's page (http://127.0.0.1:8080, http://localhost:8080); clients "
                            "that are not web pages send no origin and are admitted")
    group.add_argument("--foxglove-allow-controller", action="store_true",
                       help="let a client name the controller a retry runs (hil/retry {\"controller\": ..., "
                            "\"run\": true}; loopback only): it runs that file as you. Default: a retry runs the "
                            "trial's own controller")
    if not replay:
        group.add_argument("--foxglove-paused", action="store_true",
                           help="start paused (sim clock): press play in Foxglove's playback bar")
        group.add_argument("--foxglove-linger", type=float, default=0.0, metavar="S",
                           help="keep the Foxglove server up S seconds after the trial ends (default 0)")


def wanted(args: argparse.Namespace | None) -> bool:
    return args is not None and getattr(args, "foxglove", None) is not None


def open_live(args: argparse.Namespace, label: str = "", duration_s: float | None = None) -> Any:
    """The live server ``--foxglove`` asks for, started (its URL printed), or None when not asked."""
    if not wanted(args):
        return None
    from .address import parse_address
    from .live import LiveServer

    host, port = parse_address(args.foxglove)
    server = LiveServer(host, port, label=label, start_paused=getattr(args, "foxglove_paused", False),
                        duration_s=duration_s, **gate_options(args))
    print(f"foxglove: serving {server.url} (Foxglove: Open connection -> Foxglove WebSocket -> {server.url}"
          f"{'; paused: press play' if getattr(args, 'foxglove_paused', False) else ''})", flush=True)
    return server


def gate_options(args: argparse.Namespace) -> dict[str, Any]:
    """The web origins admitted besides the default ones, and whether a client may name a retry's controller."""
    return {"origins": tuple(getattr(args, "foxglove_origin", None) or ()),
            "allow_controller": bool(getattr(args, "foxglove_allow_controller", False))}


def close_live(server: Any, args: argparse.Namespace) -> None:
    if server is None:
        return
    _wait_for_retries(server)
    seconds = float(getattr(args, "foxglove_linger", 0.0) or 0.0)
    if seconds > 0:
        import time

        print(f"foxglove: the trial has ended; serving {server.url} for {seconds:g} s more", flush=True)
        try:
            time.sleep(seconds)
        except KeyboardInterrupt:
            print("", file=sys.stderr)
    server.close()


def _wait_for_retries(server: Any) -> None:
    """A trial retried from Foxglove ("run": true) is the user's to finish: wait for it, Ctrl-C stops it. A retry
    asked for just before the trial ended is answered first (bounded: retry.START_S)."""
    if server.retries is not None:
        server.retries.settle()
    running = server.retries.running() if server.retries is not None else []
    if not running:
        return
    where = ", ".join(r["foxglove"] for r in running)
    print(f"foxglove: the trial has ended; waiting for {len(running)} retried trial(s) served at {where} (play "
          "them in Foxglove; Ctrl-C stops them, their logs kept)", flush=True)
    try:
        server.retries.wait()
    except KeyboardInterrupt:
        print("", file=sys.stderr)


def register_layout(sub) -> None:
    layout = sub.add_parser("foxglove-layout", help="print a Foxglove layout for hil trials (hil foxglove-layout "
                                                    "> hil.json; Foxglove: Layouts -> Import from file)")
    from .layout import FOLLOW_FRAME, IMAGE_TOPIC, JOINTS_PATH

    layout.add_argument("--follow", default=FOLLOW_FRAME, metavar="FRAME",
                        help=f"the frame the 3D panel follows: the robot's base link (default {FOLLOW_FRAME}, the "
                             "commbot's; the first link of /robot/model)")
    layout.add_argument("--image-topic", default=IMAGE_TOPIC, metavar="TOPIC",
                        help=f"the camera topic of the Image panel (default {IMAGE_TOPIC})")
    layout.add_argument("--joints-path", default=JOINTS_PATH, metavar="PATH",
                        help=f"the joints' raw messages (default {JOINTS_PATH}; /robot/joints for a robot without "
                             "a base)")
    layout.set_defaults(func=cmd_layout)


def cmd_layout(args: argparse.Namespace) -> int:
    import json

    from .layout import check_layout, hil_layout

    layout = hil_layout(args.image_topic, args.follow, args.joints_path)
    check_layout(layout)
    print(json.dumps(layout, indent=2, sort_keys=True))
    return 0

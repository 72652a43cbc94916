"""``hil crowd``: run the crowd simulator standalone, or list the objectives.

    hil crowd --map arcade [--rates weekday,weekend] [--start "sat 14:00"] [--script FILE] [--seed N]
              [--duration S] [--robot X,Y[,YAW]] [--json OUT] [--sample S]
    hil crowd objectives

Standalone, the robot stands where ``--robot`` (or the script's ``robot`` lines) put it; with the world connected
over the bridge it will move. The trajectories JSON is deterministic for a seed. Only argparse is imported
at module level, so building the ``hil`` parser stays cheap.
"""
from __future__ import annotations

import argparse
import json
import sys

MIN_DT_S, MAX_DT_S = 0.001, 1.0  # the crowd's step: finer is a hang (1e-9 s), coarser walks people through walls


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("what", nargs="?", choices=("run", "objectives"), default="run",
                        help="run (default): simulate; objectives: list the objective registry with parameters")
    parser.add_argument("--map", help="a map on the config search path (e.g. arcade) or a path")
    parser.add_argument("--rates", default="weekday,weekend",
                        help="rates files, comma-separated (names under config/crowd/ or paths); the one listing "
                             "the current day applies (default: weekday,weekend)")
    parser.add_argument("--rate-scale", type=float, default=1.0, metavar="X",
                        help="multiply every appearance rate by X (0..100): a denser or sparser crowd of the same "
                             "mix (default 1)")
    parser.add_argument("--start", help="day and time at sim time 0, e.g. 'sat 14:00' (default: the first band "
                                        "of the first rates file)")
    parser.add_argument("--script", help="a scenario script (.scn; a path or a name under config/scenarios/); it "
                                         "starts with generation off and ends at its last line")
    parser.add_argument("--generate", action="store_true",
                        help="with --script: stochastic generation and reactions stay on alongside the script (as "
                             "if its first line were 'generate on'); the background crowd of a staged scene")
    parser.add_argument("--seed", type=int, default=0, help="seed of the crowd's only random generator (default 0)")
    parser.add_argument("--dt", type=float, default=0.1,  # crowd.agents.DEFAULT_DT (not imported: a fast --help)
                        help="crowd step in simulated seconds (default 0.1)")
    parser.add_argument("--duration", type=float,
                        help="simulated seconds to run without a script (default 60); a script sets its own length")
    parser.add_argument("--robot", help="robot pose X,Y[,YAW] in m, m, rad; write --robot=-3,0 when X is "
                                        "negative (default: no robot unless a script places one)")
    parser.add_argument("--json", metavar="OUT", help="write agent trajectories as JSON ('-': stdout)")
    parser.add_argument("--sample", type=float, help="trajectory sample period in simulated seconds (default: dt)")
    parser.add_argument("--serve", metavar="ENDPOINT",
                        help="be the world's crowd over the bridge: answer its ticks on this ZeroMQ endpoint "
                             "(e.g. tcp://127.0.0.1:5760; '*' as port picks one); the first stdout line says where")
    parser.add_argument("--realtime", action="store_true",
                        help="with --serve: run paced to wall time and stream (PUB/SUB plus a control channel) "
                             "for a world on the real clock (sim://...&crowd_mode=realtime), instead of lockstep")
    parser.add_argument("--keys", metavar="DIR",
                        help="with --serve: CURVE-encrypt the link and answer only worlds whose key is in "
                             "DIR/authorized/ (a key directory made by 'hil keys DIR'); needed off loopback")
    parser.add_argument("--insecure", action="store_true",
                        help="with --serve on a non-loopback address: serve without --keys anyway (anyone who can "
                             "reach the port can drive the crowd); refused otherwise")
    parser.add_argument("--allow-objectives", metavar="MODULES",
                        help="comma-separated modules a rates file may import user objectives from "
                             "(objectives.user: 'module:Class'); none unless given: importing runs the module's code")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="for 'objectives': a table or JSON")
    parser.add_argument("--again", action="store_true",
                        help="with --serve (lockstep): after each session say 'crowd-idle' on stdout and read the "
                             "next session's options from stdin (one JSON list of strings per line; stdin closed: "
                             "exit); hil's trials keep one crowd process across the trials of a process this way")


class _Parser(argparse.ArgumentParser):
    """The crowd's options for a session asked for on stdin: a bad one is an error of that session, not an exit."""

    def error(self, message: str):
        raise ValueError(f"hil crowd: {message}")


def serve_again(args: argparse.Namespace, lines=None, say=None) -> int:
    """``--again``: serve one session after another in this process, each a fresh crowd (map, rates, script, seed:
    the same as a new process would build; the imports and the compiled step are paid once). Only the lockstep
    crowd of our own trials: no --realtime, no --keys, no --allow-objectives (user objectives stay registered in a
    process). A session that cannot start says ``crowd-error REASON`` and the process waits for the next."""
    lines = lines if lines is not None else sys.stdin
    say = say or (lambda text: print(text, flush=True))
    parser = _Parser(prog="hil crowd", add_help=False)
    add_arguments(parser)
    while True:
        if args is not None:
            try:
                if not args.serve or args.realtime or args.keys or args.allow_objectives or args.what != "run":
                    raise ValueError("hil crowd: --again serves lockstep sessions only: --serve, and no --realtime, "
                                     "--keys, --allow-objectives")
                args.again = False
                run(args)
                say("crowd-idle")
            except (OSError, ValueError) as exc:
                say("crowd-error " + " ".join(str(exc).split()))
        line = lines.readline()
        if not line:
            return 0
        try:
            argv = json.loads(line)
            if not isinstance(argv, list) or not all(isinstance(a, str) for a in argv):
                raise ValueError("hil crowd --again: a session's options are one JSON list of strings per line")
            args = parser.parse_args(argv)
        except ValueError as exc:  # json.JSONDecodeError is a ValueError
            say("crowd-error " + " ".join(str(exc).split()))
            args = None


def _robot_pose(text: str) -> tuple[float, float, float]:
    try:
        values = [float(v) for v in text.split(",")]
    except ValueError:
        values = []
    if len(values) not in (2, 3):
        raise ValueError(f"--robot {text!r}: expected X,Y or X,Y,YAW (numbers)")
    return values[0], values[1], values[2] if len(values) == 3 else 0.0


def _security(args: argparse.Namespace):
    """The keys of ``--keys``, checked before any file is loaded or anything bound: a bad key directory stops the
    command with the file and the reason, not a crowd that silently refuses everyone."""
    if not args.keys:
        if args.serve and not args.insecure and not is_loopback(args.serve):
            raise ValueError(f"hil crowd: --serve {args.serve} is reachable from other machines: give --keys DIR "
                             f"(CURVE: 'hil keys DIR' makes one) or, knowingly, --insecure")
        return None
    if not args.serve:
        raise ValueError("hil crowd: --keys secures the link of --serve: it needs --serve ENDPOINT")
    from hil.bridge.security import Security

    security = Security.load(args.keys)
    security.check_server()
    return security


def is_loopback(endpoint: str) -> bool:
    """A ZeroMQ endpoint only this machine can reach: tcp on 127.x / ::1 / localhost, or ipc/inproc."""
    import ipaddress
    from urllib.parse import urlsplit

    parts = urlsplit(endpoint)
    if parts.scheme in ("ipc", "inproc"):
        return True
    host = parts.netloc.rpartition(":")[0].strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # '*', an interface name or a host name: not provably loopback
        return False


def list_objectives(fmt: str = "text") -> str:
    from .objectives import describe

    items = describe()
    if fmt == "json":
        return json.dumps(items, indent=2)
    lines = []
    for item in items:
        lines.append(f"{item['name']}: {item['summary']}")
        for key, p in item["params"].items():
            lines.append(f"    {key} = {p['default']:g}    {p['doc']}")
        if not item["params"]:
            lines.append("    (no parameters)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    """The ``hil crowd`` command; returns the exit code. Config and script errors raise ValueError (file:line)."""
    if getattr(args, "again", False):
        return serve_again(args)
    if args.what == "objectives":
        print(list_objectives(args.format))
        return 0
    if not args.map:
        raise ValueError("hil crowd: --map is needed (e.g. --map arcade)")
    if args.realtime and not args.serve:
        raise ValueError("hil crowd: --realtime is a way of serving: it needs --serve ENDPOINT")
    if args.generate and not args.script:
        raise ValueError("hil crowd: --generate goes with --script (without a script generation is on anyway)")
    if args.script and args.duration is not None:
        raise ValueError("hil crowd: --duration and --script do not go together: the script's last line ends the run")
    from .script import MAX_DURATION_S

    if not MIN_DT_S <= args.dt <= MAX_DT_S:  # also NaN
        raise ValueError(f"hil crowd: --dt must be {MIN_DT_S:g}..{MAX_DT_S:g} s (MIN_DT_S..MAX_DT_S), not {args.dt}")
    if args.duration is not None and not 0 < args.duration <= MAX_DURATION_S:
        raise ValueError(f"hil crowd: --duration must be > 0 and at most MAX_DURATION_S={MAX_DURATION_S:g} s (a "
                         f"week of crowd time), not {args.duration}")
    if args.sample is not None and not 0 < args.sample <= MAX_DURATION_S:
        raise ValueError(f"hil crowd: --sample must be a period > 0 s (at most MAX_DURATION_S), not {args.sample}")
    security = _security(args)
    if args.allow_objectives:
        from .objectives import allow_user_modules

        allow_user_modules(args.allow_objectives.split(","))

    from .maps import load_crowd_map
    from .population import load_rates, parse_start
    from .record import TrajectoryRecorder
    from .script import Scenario, ScriptError, check, load_script
    from .sim import CrowdSim

    crowd_map = load_crowd_map(args.map)
    tables = [load_rates(name.strip()) for name in args.rates.split(",") if name.strip()]
    start_s = parse_start(args.start) if args.start else None
    script = load_script(args.script) if args.script else None
    sim = CrowdSim(crowd_map, seed=args.seed, dt=args.dt)
    if args.robot:
        x, y, yaw = _robot_pose(args.robot)
        sim.set_robot(x, y, yaw=yaw)
    scenario = Scenario(sim, rates=tables, start_s=start_s, generate=script is None, rate_scale=args.rate_scale)
    if script is not None:  # a bad line stops us here, before anything runs or any file is written
        check(script, crowd_map, types=scenario.types, can_generate=scenario.generator is not None)
    if args.serve:
        from .serve import serve
        from .stepper import Stepper

        stepper = Stepper(sim)
        if script is not None:  # the script plays on the world's time, tick by tick
            stepper.start(scenario.play(script, on_line=stepper.line_ran, generate=args.generate, world_robot=True))
        if args.realtime:
            from .serve_realtime import serve_realtime

            stats = serve_realtime(sim, args.serve, ready=lambda line: print(line, flush=True), security=security,
                                   stepper=stepper)
            print(f"crowd: {stats.steps} steps in real time ({stats.skipped} skipped), {sim.time_s:.1f} s "
                  "simulated", file=sys.stderr)
            return 0
        ticks = serve(sim, args.serve, ready=lambda line: print(line, flush=True), stepper=stepper,
                      security=security)
        print(f"crowd: served {ticks} ticks, {sim.time_s:.1f} s simulated", file=sys.stderr)
        return 0
    recorder = TrajectoryRecorder(sim, args.sample)
    sim.hooks.append(recorder)
    failure: ScriptError | None = None
    try:
        if script is not None:
            scenario.run_script(script, generate=args.generate)
        else:
            scenario.run(60.0 if args.duration is None else args.duration)
    except ScriptError as exc:  # found while running (a wait that timed out): keep what was simulated
        failure = exc
    recorder.sample()

    parties = scenario.generator.parties if scenario.generator else []
    summary = {"map": crowd_map.name, "seed": args.seed, "simulated_s": round(sim.time_s, 6),
               "people_appeared": sum(len(p.types) for p in parties), "parties": len(parties),
               "scripted": len(scenario.ids), "on_map_at_end": len(sim.agents),
               "reactions": _count(name for _, _, name in scenario.objectives.history)}
    if failure is not None:
        summary["error"] = str(failure)
    if args.json:
        meta = {"map": crowd_map.name, "seed": args.seed, "script": args.script, "summary": summary}
        text = recorder.to_json(**meta)
        if args.json == "-":
            print(text)
        else:
            with open(args.json, "w", encoding="utf-8") as fh:
                fh.write(text)
    if args.json != "-":
        reactions = ", ".join(f"{k} {v}" for k, v in summary["reactions"].items()) or "none"
        print(f"crowd: {summary['map']}, seed {args.seed}, {summary['simulated_s']:g} s simulated; "
              f"{summary['people_appeared']} people in {summary['parties']} parties appeared, "
              f"{summary['scripted']} scripted, {summary['on_map_at_end']} on the map at the end; "
              f"reactions: {reactions}" + (f"; trajectories in {args.json}" if args.json else ""))
    if failure is not None:
        raise failure  # reported by the caller as an error (exit 2), after the trajectories were written
    return 0


def _count(names) -> dict[str, int]:
    out: dict[str, int] = {}
    for n in names:
        out[n] = out.get(n, 0) + 1
    return dict(sorted(out.items()))


def register(sub) -> None:
    """``hil crowd``: the crowd simulator's one subcommand."""
    crowd = sub.add_parser("crowd", help="the crowd simulator standalone (trajectories as JSON) or served to a "
                                         "world; 'hil crowd objectives' lists the reactions to the robot")
    add_arguments(crowd)
    crowd.set_defaults(func=run)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="hil crowd", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except (OSError, ValueError) as exc:
        print(f"hil crowd: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""``hil keys DIR``: make a key directory for CURVE on the bridge (bridge/security.py) and say how to use it.

The bridge is plain on loopback; the moment a crowd, a clock or a world talks across a network, both ends take
``--keys DIR`` (``keys=DIR`` in a sim:// URL). This command writes the pairs in zmq.auth's certificate format and
authorizes the client, then loads the directory back, so what it prints is known to work.
"""
from __future__ import annotations

import argparse
from pathlib import Path

ROLES = {
    "server.key": "server public key: every machine needs it",
    "server.key_secret": "server secret key: only on the serving machine (crowd --serve, sim --clock-endpoint)",
    "client.key": "client public key",
    "client.key_secret": "client secret key: only on the connecting machine (the world, a clock participant)",
    "authorized/client.key": "the clients the servers admit (one *.key file per client)",
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("dir", help="key directory to create (e.g. keys; a new one is made owner-only)")
    parser.add_argument("--force", action="store_true", help="replace keys already there (their peers then need "
                                                             "the new ones)")


def usage(keys_dir: Path) -> list[str]:
    """How both ends of each secured link name the directory."""
    return [f"  hil crowd --map arcade --serve tcp://0.0.0.0:5760 --keys {keys_dir}",
            f"  hil run CONTROLLER --profile P --bus 'sim://commbot?crowd=tcp://HOST:5760&keys={keys_dir}'",
            f"  hil sim commbot --tcp 0 --clock sim --clock-endpoint tcp://0.0.0.0:5757 --keys {keys_dir}"]


def run(args: argparse.Namespace, out=print) -> int:
    from hil.bridge.security import Security, SecurityError, create_keys, curve_available

    if not curve_available():
        raise SecurityError("hil keys: this libzmq was built without CURVE; the bridge cannot be secured")
    keys_dir = Path(args.dir)
    written = create_keys(keys_dir, overwrite=args.force)
    Security.load(keys_dir)  # what was written must load; a failure here is a bug worth a loud error
    out(f"wrote CURVE keys in {keys_dir}:")
    width = max(len(str(path)) for path in written)
    for path in written:
        out(f"  {path!s:<{width}}  {ROLES.get(path.relative_to(keys_dir).as_posix(), '')}")
    out("copy the directory to both ends (each needs only its files above) and name it on both:")
    for line in usage(keys_dir):
        out(line)
    return 0

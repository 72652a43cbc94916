"""A device subprocess that prints the pty (or URL) to connect to on its first stdout line."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hil.bridge.process import spawn

ROOT = Path(__file__).resolve().parent.parent  # where ``bench`` and the project import from


def hil_command() -> list[str]:
    hil = Path(sys.executable).with_name("hil")
    return [str(hil)] if hil.exists() else [sys.executable, "-m", "hil"]


def stop(proc: subprocess.Popen) -> None:
    """Terminate a device or crowd subprocess, killing it if it does not go within 5 s."""
    if proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(5)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


class PtyProcess:
    def __init__(self, cmd: list[str]):
        self.proc = spawn(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, cwd=ROOT)  # dies with us
        self.path = self.proc.stdout.readline().strip()
        if not self.path:
            self.proc.kill()
            raise RuntimeError(f"{' '.join(cmd)} printed no pty path")

    def close(self) -> None:
        stop(self.proc)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        self.close()

"""A real browser for the viewer's tests: the system's Chromium (Debian package) driven by Playwright.

Nothing is downloaded: Playwright is pointed at /usr/bin/chromium (``playwright install`` is never run), and the
browser starts with background networking, component updates, sync and QUIC off, in a fresh profile, so every
request it makes is one the page asked for (the tests check they all went to the viewer). Without Chromium or
Playwright a test fails under ``CI`` and is skipped elsewhere (.ci/run installs Chromium with apt-get).
"""
from __future__ import annotations

import os
import re
import shutil
import tempfile
import time
from contextlib import contextmanager
from typing import Iterator

from waiting import needs
from waiting import wait_for as shared_wait_for

CHROMIUM = "/usr/bin/chromium"
ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
        "--disable-background-networking", "--disable-component-update", "--disable-sync",
        "--enable-unsafe-swiftshader"]  # WebGL on the CPU (SwiftShader): headless, no GPU
PAGE_TIMEOUT_MS = 120_000  # a loaded 2-core machine renders WebGL in software


def need_tool(path: str, what: str) -> None:
    if not (os.path.exists(path) or shutil.which(path)):
        needs(f"{what} ({path}) is not installed (apt-get install -y {os.path.basename(path)})")


@contextmanager
def browser_page(width: int = 1280, height: int = 800) -> Iterator[tuple[object, list[str]]]:
    """(page, every URL it requested) in a fresh Chromium profile."""
    need_tool(CHROMIUM, "Chromium")
    try:
        from playwright.sync_api import sync_playwright
    except ImportError as exc:  # the test extra has it
        needs(f"playwright is not installed (pip install -e '.[test]'): {exc}")
    profile = tempfile.mkdtemp(prefix="hil-chromium-")
    requests: list[str] = []
    try:
        with sync_playwright() as p:
            context = p.chromium.launch_persistent_context(profile, executable_path=CHROMIUM, headless=True,
                                                           args=ARGS, viewport={"width": width, "height": height})
            try:
                page = context.new_page()
                page.set_default_timeout(PAGE_TIMEOUT_MS)
                page.on("request", lambda request: requests.append(request.url))
                yield page, requests
            finally:
                context.close()
    finally:
        shutil.rmtree(profile, ignore_errors=True)


def need_viser() -> None:
    try:
        import viser  # noqa: F401
    except ImportError as exc:
        needs(f"viser is not installed (pip install -e '.[test,view]'): {exc}")


def colour_pixels(png: bytes, rgb: tuple[int, ...], tolerance: int = 40) -> int:
    """How many pixels of a screenshot lie within ``tolerance`` of ``rgb`` in every channel."""
    import imageio.v3 as iio  # comes with viser
    import numpy as np

    image = iio.imread(png)[..., :3].astype(int)
    return int(np.all(np.abs(image - np.array(rgb[:3])) <= tolerance, axis=2).sum())


def number(page, selector: str) -> float:
    return float(page.inner_text(selector).strip())


def wait_for(predicate, timeout_s: float = 120.0, every_s: float = 0.2, what: str = "condition"):
    """Poll ``predicate`` until it gives something truthy (returned); fail naming ``what`` after ``timeout_s``."""
    return shared_wait_for(predicate, what, timeout_s, step=lambda: time.sleep(every_s))


def type_until(box, text: str, done, what: str) -> None:
    """Type ``text`` into ``box`` (Enter after it) until ``done()`` holds, failing naming ``what`` at the bound.

    A fill the page's input is not yet listening to is lost (seen under CI's load, in three tests, even after
    the page showed what they waited for), so it is typed again every 5 s until ``done()``; the wait itself is
    ``wait_for``'s, a hang bound, not a timing check.
    """
    typed_at = [-1e9]

    def typed() -> bool:
        if done():
            return True
        if time.monotonic() - typed_at[0] > 5.0:
            box.fill(text)
            box.press("Enter")
            typed_at[0] = time.monotonic()
        return False

    wait_for(typed, what=what)


def scrub(page, to_s: float, box=None) -> None:
    """Scrub a replay to ``to_s`` with its time box (the page's first number input) and wait until it shows."""
    box = box if box is not None else page.locator("input.mantine-NumberInput-input").first
    type_until(box, f"{to_s:g}", lambda: number(page, "#hil-sim-time") == to_s, "the scrubbed time on the page")


def only_local(requests: list[str], url: str) -> list[str]:
    """The requests that went anywhere but the viewer (blob: and data: URLs are the page's own)."""
    base = re.escape(url.rstrip("/"))
    return [r for r in requests if not re.match(rf"^({base}|blob:{base}|data:)", r)
            and not r.startswith(url.replace("http://", "ws://").rstrip("/"))]


class SimTimeGate:
    """Holds a trial in a bus cycle once it has run ``at_s`` of sim time, until ``release`` is set.

    The demo runs several times faster than real time: left running, it can reach its end before a page's Pause
    does (then nothing is left to step). A test passes ``hook`` as a trial hook, waits for ``reached``, pauses the
    page, then sets ``release``: the pause and the steps after it act on a trial that is still running."""

    def __init__(self, at_s: float, hold_s: float = 120.0):
        import threading

        self.at_s, self.hold_s = at_s, hold_s
        self.reached, self.release = threading.Event(), threading.Event()
        self._start_s: float | None = None

    def hook(self, robot) -> None:
        now = robot.clock.now()
        if self._start_s is None:
            self._start_s = now
        if not self.reached.is_set() and now - self._start_s >= self.at_s:
            self.reached.set()
            self.release.wait(self.hold_s)

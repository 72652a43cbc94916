"""hil view's camera panel (trial/view/camera_panel.py): the robot camera's picture from the log, in step with the
page's time, replayed and live.

The expected pictures are read from trial.mcap independently of the viewer: the mcap package's reader, the
protobuf classes built from the schemas the log carries, Pillow for the JPEG. Replayed in a real Chromium,
scrubbing must show the log's latest picture at or before the scrubbed time (the array the page was sent, and on
the page an image of the camera's size whose colours are the picture's); live, the last picture shown is the log's
last, RGB and depth (NaN drawn black); from the page's own process (``--view``) the pictures arrive through its
pipe; malformed pictures and bytes on other topics are refused without stopping the page.
"""
from __future__ import annotations

import html
import io
import json
import re
import threading

import numpy as np
import pytest
from mcap.reader import make_reader
from PIL import Image

from browser import browser_page, need_viser, number, only_local, scrub, wait_for

CAMERA = "head_camera"


def _log_pictures(folder_or_log, name=CAMERA):
    """{kind: [(t, array)]} of one camera from the log: rgb (HxWx3 uint8), depth (HxW float32)."""
    from test_foxglove_log import _protobuf_class

    path = folder_or_log if str(folder_or_log).endswith(".mcap") else folder_or_log / "trial.mcap"
    out: dict[str, list] = {"rgb": [], "depth": []}
    classes: dict = {}
    with open(path, "rb") as f:
        for schema, channel, message in make_reader(f).iter_messages(
                topics=[f"/foxglove/{name}/image", f"/foxglove/{name}/depth"]):
            cls = classes.get(schema.id) or classes.setdefault(schema.id, _protobuf_class(schema))
            decoded = cls.FromString(message.data)
            t = message.log_time / 1e9
            if channel.topic.endswith("/image"):
                out["rgb"].append((t, np.asarray(Image.open(io.BytesIO(decoded.data)).convert("RGB"))))
            else:
                out["depth"].append((t, np.frombuffer(decoded.data, "<f4").reshape(decoded.height, decoded.width)))
    return out


def _log_camera_faults(folder, name=CAMERA):
    """[(t, message)] of one camera's /robot/camera_faults, read from the log with mcap's own reader."""
    out = []
    with open(folder / "trial.mcap", "rb") as f:
        for _, _, message in make_reader(f).iter_messages(topics=["/robot/camera_faults"]):
            data = json.loads(message.data)
            if data["camera"] == name:
                out.append((message.log_time / 1e9, data))
    return out


def _caption_invalid(caption: str) -> dict | None:
    found = re.search(r"data-invalid='([^']*)'", caption)
    return json.loads(html.unescape(found.group(1))) if found and found.group(1) else None


def _at(pictures, t):
    return [p for p in pictures if p[0] <= t + 1e-9][-1]


def _caption_t(page) -> float | None:
    value = page.get_attribute("#hil-camera", "data-t")
    return float(value) if value else None


def _panel_image(page):
    """The <img> of the camera panel: the one the page shows at the camera's pixel size."""
    return page.evaluate("""() => { const img = [...document.querySelectorAll('img')].find(
        i => i.naturalWidth === 320 && i.naturalHeight === 240); return img ? img.src : null; }""")


def test_replay_shows_the_logs_picture_at_the_scrubbed_time(short_demo_log, tmp_path):
    need_viser()
    from hil.trial.view.app import Viewer
    from hil.trial.view.timeline import Timeline

    pictures = _log_pictures(short_demo_log)["rgb"]
    assert len(pictures) >= 30  # 7 s at 5 Hz
    viewer = Viewer(port=0)
    viewer.show_replay(Timeline.from_log(short_demo_log))
    panel = viewer.camera_panel
    try:
        wait_for(lambda: panel.which.options == ("head_camera", "right_camera"), what="the cameras listed")
        with browser_page() as (page, requests):
            page.goto(viewer.url)
            page.wait_for_selector("#hil-camera")
            wait_for(lambda: _caption_t(page) == 0.0, what="the first picture's time on the page")
            first_src = wait_for(lambda: _panel_image(page), what="a 320x240 picture on the page")
            seen = []
            for scrub_to, picture_t in ((3.3, 3.2), (6.0, 6.0)):
                scrub(page, scrub_to)
                wait_for(lambda: _caption_t(page) == picture_t, what=f"the picture of {picture_t} s named")
                t, want = _at(pictures, scrub_to)
                assert abs(t - picture_t) < 1e-6
                assert np.array_equal(panel.image.image, want), "the panel was sent another picture than the log's"
                src = wait_for(lambda: (s := _panel_image(page)) not in (None, first_src, *seen) and s,
                               what="the page's picture to change")
                seen.append(src)
                shot = np.asarray(Image.open(io.BytesIO(page.locator(f"img[src='{src}']").screenshot())))[..., :3]
                assert np.abs(shot.reshape(-1, 3).mean(0) - want.reshape(-1, 3).mean(0)).max() < 12, \
                    "the page does not show the picture's colours"
            assert not np.array_equal(_at(pictures, 3.3)[1], _at(pictures, 6.0)[1])  # the robot moved
            assert not only_local(requests, viewer.url), "the page fetched from elsewhere"
        panel.kind.value = "depth"
        wait_for(lambda: "no depth recorded" in panel._caption, what="the panel to say no depth was recorded")
    finally:
        viewer.close()


def _still(robot):
    for _ in robot.loop(hz=20):
        pass


def _camera_trial():
    from hil.trial import Trial

    return Trial(_still, robot="commbot", map="lab", duration=2.0, seed=0, camera_rate=5.0, camera_depth=True)


def test_live_shows_the_pictures_as_the_log_gets_them(tmp_path):
    need_viser()
    from hil.trial.view.app import Viewer, run_trial_in_thread
    from hil.trial.view.camera_panel import colour_depth
    from hil.trial.view.live import LiveTrial

    viewer = Viewer(port=0)
    live = LiveTrial("camera")
    viewer.attach(live)
    run_trial_in_thread(_camera_trial().spec, tmp_path / "live", live)
    panel = viewer.camera_panel
    try:
        wait_for(lambda: panel.which.value == CAMERA, what="the camera to appear live")
        wait_for(live.done.is_set, timeout_s=600, what="the trial to end")
        assert live.error is None and live.result.status == "ok", live.error
        pictures = _log_pictures(tmp_path / "live")
        last_t, last_rgb = pictures["rgb"][-1]
        wait_for(lambda: f"data-t='{last_t:.3f}'" in panel._caption, what="the log's last picture shown")
        assert np.array_equal(panel.image.image, last_rgb)
        # under it, that frame's invalid depth pixels by cause, as the log has them
        faults = _log_camera_faults(tmp_path / "live")
        assert faults[-1][0] == pytest.approx(last_t) and sum(faults[-1][1]["invalid"].values()) > 0
        wait_for(lambda: _caption_invalid(panel._caption) == faults[-1][1]["invalid"],
                 what="the frame's invalid pixels by cause in the caption")
        assert "depth invalid" in panel._caption and "shadow" in panel._caption
        panel.kind.value = "depth"
        wait_for(lambda: "data-kind='depth'" in panel._caption, what="the depth picture")
        depth_t, depth = pictures["depth"][-1]
        assert depth_t == last_t and np.isnan(depth).any()
        shown = panel.image.image
        assert np.array_equal(shown, colour_depth(depth))
        black = (shown == 0).all(axis=2)
        assert np.array_equal(black[np.isnan(depth)], np.ones(int(np.isnan(depth).sum()), bool))
        assert black.mean() < np.isnan(depth).mean() + 0.01  # black is what the camera did not measure
    finally:
        viewer.close()


def test_the_pages_own_process_gets_the_pictures_through_its_pipe(tmp_path):
    need_viser()
    from hil.trial.view.remote import ViewerProcess

    trial = _camera_trial()
    viewer = ViewerProcess("127.0.0.1", 0, label="camera")
    box: list = []

    def run():
        result = trial.run(tmp_path / "viewed", listeners=viewer.listeners, hooks=viewer.hooks, taps=viewer.taps)
        viewer.finish(result, result.error)
        box.append(result)

    worker = threading.Thread(target=run, daemon=True)
    try:
        worker.start()
        worker.join(600)
        assert box and box[0].status == "ok", box
        last_t = _log_pictures(tmp_path / "viewed")["rgb"][-1][0]
        with browser_page() as (page, _):
            page.goto(viewer.url)
            page.wait_for_selector("#hil-camera")
            wait_for(lambda: _caption_t(page) == round(last_t, 3), what="the log's last picture on the page")
            assert page.get_attribute("#hil-camera", "data-camera") == CAMERA
            wait_for(lambda: _panel_image(page), what="a 320x240 picture on the page")
    finally:
        viewer.close()
    assert viewer.proc.returncode == 0


def test_bad_pictures_and_bytes_elsewhere_are_refused():
    from hil.trial.view.camera_panel import decode_depth, decode_rgb, protobuf_fields
    from hil.trial.view.remote import RemoteLive

    live = RemoteLive("x", lambda _: None)
    live.apply({"m": [["/robot/state", 0.1, b"\x00\x01"], ["/foxglove/tf", 0.1, b"\x00"]]})
    assert live.timeline.version == 0  # bytes only ever for a camera's picture topic
    live.apply({"m": [["/foxglove/head_camera/image", 0.1, b"\x12\x03abc"]]})
    assert live.timeline.cameras() == ("head_camera",)
    for junk in (b"\x12\x09abc", b"\x80", b"\x0f", b"\x12\x03abc"):  # cut, cut varint, wire type 7, not a JPEG
        try:
            decode_rgb(junk)
        except ValueError as exc:
            assert "protobuf" in str(exc) or "data" in str(exc) or "image" in str(exc).lower(), exc
        except Exception as exc:  # noqa: BLE001 - Pillow's own error for bytes that are no image
            assert type(exc).__name__ == "UnidentifiedImageError", exc
        else:
            raise AssertionError(f"{junk!r} decoded")
    assert protobuf_fields(b"") == {}
    import foxglove.messages as fx

    short = fx.RawImage(width=4, height=4, encoding="32FC1", step=16, data=b"\x00" * 8).encode()
    try:
        decode_depth(short)
    except ValueError as exc:
        assert "4x4" in str(exc)
    else:
        raise AssertionError("a depth image shorter than its size decoded")

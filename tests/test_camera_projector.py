"""The depth camera's projector as a pose: a pixel is measured only where both the lens and the projector see the
point. A horizontal pole in front of a wall, the projector above the lens: a band of the wall just below the pole
is invalid, the rows the test works out by similar triangles from the projector's and the lens's positions, the
pole's edges and the wall's distance; the projector beside the lens (the catalog camera's default): the band is
beside a standing pole, on the side away from the projector. A trial's metrics count those pixels as ``shadow``
under ``sensors.head_camera.invalid``, and none for a flat wall.

Everything real: the commbot in a pybullet DIRECT world, frames rendered as the suite renders them (moderngl on
Mesa's EGL, or pybullet's TinyRenderer where no EGL opens), a part file with the projector above the lens swapped
in for the left eye as the trial faults swap parts.
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from hil.devices.catalog import load_source
from hil.devices.descriptor import DescriptorError
from hil.firmware_sim import hotplug, load_assembly
from hil.firmware_sim.embodied.embody import embody
from hil.firmware_sim.render.scene import WALL
from hil.trial import Trial

ROOT = Path(__file__).resolve().parents[1]
CATALOG_CAMERA = ROOT / "devices" / "catalog" / "parts" / "camera.yaml"
LEFT_EYE = 43  # config/robots/commbot.yaml
WALL_X, WALL_THICKNESS = 3.0, 0.1  # a wall across the view, 3 m ahead of the robot at the origin
ABOVE_M = 0.08  # the swapped-in part's projector: 8 cm above the lens
BAR_X, BAR_DEPTH, BAR_BOTTOM, BAR_HEIGHT, BAR_HALF_LENGTH = 1.2, 0.04, 1.0, 0.04, 0.4  # a horizontal pole
POLE_X, POLE_SIDE = 0.7, 0.04  # a standing pole, 4 cm square, from the floor to 2.5 m
EDGE_PX = 1.5  # pixels left out on each side of a predicted boundary (an edge pixel is partly each)


def _wall_map(folder: Path, *extra: str) -> Path:
    path = folder / "scene.yaml"
    lines = [f"  - {{from: [{WALL_X}, -3.0], to: [{WALL_X}, 3.0], thickness: {WALL_THICKNESS}, height: 3.0}}",
             *extra]
    path.write_text("name: scene\nwalls:\n" + "\n".join(lines) + "\n")
    return path


def _bar() -> str:
    return (f"  - {{from: [{BAR_X}, {-BAR_HALF_LENGTH}], to: [{BAR_X}, {BAR_HALF_LENGTH}], thickness: {BAR_DEPTH}, "
            f"height: {BAR_HEIGHT}, bottom: {BAR_BOTTOM}}}")


def _pole() -> str:
    return (f"  - {{from: [{POLE_X - POLE_SIDE / 2}, 0.0], to: [{POLE_X + POLE_SIDE / 2}, 0.0], "
            f"thickness: {POLE_SIDE}, height: 2.5}}")


def _camera_text(**lines: str | None) -> str:
    """The catalog camera's part file with the depth lines ``key:`` replaced whole by the given text (None: gone)."""
    out = []
    for row in CATALOG_CAMERA.read_text().splitlines(keepends=True):
        key = row.strip().split(":")[0]
        if row.startswith("        ") and key in lines:
            if lines[key] is not None:
                out.append(f"        {lines[key]}\n")
            continue
        out.append(row)
    text = "".join(out)
    assert text != CATALOG_CAMERA.read_text()
    return text


def _camera_with_projector_above(folder: Path):
    """The catalog camera's part file with its projector put 8 cm above the lens instead of beside it."""
    path = folder / "camera.yaml"
    path.write_text(_camera_text(baseline_m=f"projector: {{position: [0.0, 0.0, {ABOVE_M}]}}", shadow_side=None))
    return load_source(path)


def _frame(map_path: Path, part=None) -> dict:
    world = embody(load_assembly("commbot"), clock="sim", watchdog_s=0.0, map_name=str(map_path))
    try:
        if part is not None:
            hotplug.swap(world.device, LEFT_EYE, part)
        return world.camera_frame(LEFT_EYE)
    finally:
        world.close()


def _lens(frame: dict) -> tuple[np.ndarray, np.ndarray]:
    """(the lens's position, its rotation: columns forward, left, up) in the map frame, from the frame's pose."""
    x, y, z, w = frame["pose"]["orientation"]
    rotation = np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                         [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                         [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])
    return np.asarray(frame["pose"]["position"], float), rotation


def _level(rotation: np.ndarray) -> None:
    assert np.allclose(rotation, np.eye(3), atol=1e-3), "the eye should look straight along +x at t = 0"


def test_the_projector_above_the_lens_shadows_the_wall_below_a_horizontal_pole(tmp_path):
    frame = _frame(_wall_map(tmp_path, _bar()), _camera_with_projector_above(tmp_path))
    lens, rotation = _lens(frame)
    _level(rotation)
    projector = lens + rotation @ np.array([0.0, 0.0, ABOVE_M])
    k = frame["intrinsics"]
    face = WALL_X - WALL_THICKNESS / 2  # the wall's face toward the robot

    def blocked_on_wall(eye: np.ndarray) -> tuple[float, float]:
        """The heights on the wall's face between which the pole stops the rays from ``eye``: from the steepest
        line through one of its two bottom edges to the flattest through one of its two top edges (similar
        triangles)."""
        edges = (BAR_X - BAR_DEPTH / 2, BAR_X + BAR_DEPTH / 2)
        low = min((BAR_BOTTOM - eye[2]) / (x - eye[0]) for x in edges)
        high = max((BAR_BOTTOM + BAR_HEIGHT - eye[2]) / (x - eye[0]) for x in edges)
        return eye[2] + low * (face - eye[0]), eye[2] + high * (face - eye[0])

    def row(height: float) -> float:
        return k["cy"] - k["fy"] * (height - lens[2]) / (face - lens[0])

    hidden_low, _ = blocked_on_wall(lens)  # the wall the lens does not see, behind the pole, ends here
    dark_low, dark_high = blocked_on_wall(projector)  # the wall the projector does not light
    assert dark_low < hidden_low, "the projector above the lens: its shadow reaches lower than the lens's"
    top, bottom = row(min(dark_high, hidden_low)), row(dark_low)
    assert bottom - top > 6, "the scene should cast a band of several rows"
    depth, labels = frame["depth"], frame["labels"]
    # the columns the pole covers, well inside its ends
    ends = [k["cx"] - k["fx"] * (y - lens[1]) / (BAR_X - BAR_DEPTH / 2 - lens[0]) for y in (BAR_HALF_LENGTH,
                                                                                            -BAR_HALF_LENGTH)]
    cols = np.arange(math.ceil(ends[0]) + 10, math.floor(ends[1]) - 10)
    assert len(cols) > 100
    shadow = np.arange(math.ceil(top + EDGE_PX), math.floor(bottom - EDGE_PX) + 1)
    below = np.arange(math.ceil(bottom + EDGE_PX), math.ceil(bottom + EDGE_PX) + 10)
    assert (labels[np.ix_(shadow, cols)] == WALL).all() and (labels[np.ix_(below, cols)] == WALL).all()
    assert np.isnan(depth[np.ix_(shadow, cols)]).all(), "the wall just below the pole is in the projector's shadow"
    lit = ~np.isnan(depth[np.ix_(below, cols)])
    assert lit.mean() > 0.99, "below the band the projector lights the wall again"
    # above the pole nothing is shadowed: the wall rows just above the pole's top edge are measured
    top_edge = k["cy"] - k["fy"] * (BAR_BOTTOM + BAR_HEIGHT - lens[2]) / (BAR_X + BAR_DEPTH / 2 - lens[0])
    above = np.arange(math.floor(top_edge - 12), math.floor(top_edge - EDGE_PX - 2))
    assert np.abs(depth[np.ix_(above, cols)] - (face - lens[0])).max() < 0.1
    # the band is all the frame's shadow: the pole's width times the band's height, nothing beside its ends (the
    # projector is straight above the lens)
    assert frame["invalid"]["shadow"] == pytest.approx((ends[1] - ends[0]) * (bottom - top), rel=0.15)


def test_the_projector_beside_the_lens_shadows_the_wall_on_the_far_side_of_a_standing_pole(tmp_path):
    """The catalog camera: its projector 5 cm to the left of the lens (baseline_m, shadow_side: right)."""
    frame = _frame(_wall_map(tmp_path, _pole()))
    lens, rotation = _lens(frame)
    _level(rotation)
    projector = lens + rotation @ np.array([0.0, 0.05, 0.0])
    k = frame["intrinsics"]
    face = WALL_X - WALL_THICKNESS / 2

    def blocked_on_wall(eye: np.ndarray) -> tuple[float, float]:
        """The y on the wall's face between which the pole stops the rays from ``eye`` (right, left): through one
        of its two right-hand (-y) edges, through one of its two left-hand edges (similar triangles)."""
        edges = (POLE_X - POLE_SIDE / 2, POLE_X + POLE_SIDE / 2)
        right = min((-POLE_SIDE / 2 - eye[1]) / (x - eye[0]) for x in edges)
        left = max((POLE_SIDE / 2 - eye[1]) / (x - eye[0]) for x in edges)
        return eye[1] + right * (face - eye[0]), eye[1] + left * (face - eye[0])

    def column(y: float) -> float:
        return k["cx"] - k["fx"] * (y - lens[1]) / (face - lens[0])

    hidden_right, _ = blocked_on_wall(lens)
    dark_right, dark_left = blocked_on_wall(projector)
    assert dark_right < hidden_right, "the projector left of the lens: its shadow reaches farther right"
    left, right = column(min(dark_left, hidden_right)), column(dark_right)
    assert right - left > 6
    depth, labels = frame["depth"], frame["labels"]
    rows = np.arange(int(k["cy"]) - 30, int(k["cy"]) + 30)  # the wall behind the pole at the lens's height
    shadow = np.arange(math.ceil(left + EDGE_PX), math.floor(right - EDGE_PX) + 1)
    beyond = np.arange(math.ceil(right + EDGE_PX), math.ceil(right + EDGE_PX) + 10)
    assert (labels[np.ix_(rows, shadow)] == WALL).all()
    assert np.isnan(depth[np.ix_(rows, shadow)]).all(), "the wall right of the pole is in the projector's shadow"
    assert (~np.isnan(depth[np.ix_(rows, beyond)])).mean() > 0.99
    # the pole's left side casts nothing the lens sees: the wall just left of the pole is measured
    pole_left = k["cx"] - k["fx"] * (POLE_SIDE / 2 - lens[1]) / (POLE_X - POLE_SIDE / 2 - lens[0])
    before = np.arange(math.floor(pole_left) - 12, math.floor(pole_left - EDGE_PX - 1))
    assert np.abs(depth[np.ix_(rows, before)] - (face - lens[0])).max() < 0.1


@pytest.mark.parametrize("with_pole", [True, False], ids=["pole", "flat-wall"])
def test_the_metrics_count_shadow_pixels_for_a_pole_and_none_for_a_flat_wall(tmp_path, with_pole):
    """A trial recording its camera and its depth at 5 Hz (the suite turns recording off: this trial sets
    camera_rate; a frame's depth is measured, and counted, once someone looks at it: here the log)."""
    scene = _wall_map(tmp_path, *([_pole()] if with_pole else []))
    result = Trial(lambda robot: [None for _ in robot.loop(hz=10, duration_s=0.5)], robot="commbot",
                   map=str(scene), start=(0.0, 0.0, 0.0), duration=0.6, seed=0, camera_rate=5.0,
                   camera_depth=True).run(tmp_path / "trial")
    assert result.status == "ok", result.summary_line()
    metrics = json.loads((tmp_path / "trial" / "metrics.json").read_text())
    camera = metrics["sensors"]["head_camera"]
    assert camera["frames"] >= 3 and camera["pixels"] == camera["frames"] * 320 * 240
    invalid = camera["invalid"]
    assert set(invalid) == {"no_return", "range", "shadow", "angle", "total"}
    assert invalid["total"] == sum(v for cause, v in invalid.items() if cause != "total")
    if with_pole:
        # the band is about 14 columns wide over the wall's rows, every frame
        assert invalid["shadow"] > camera["frames"] * 14 * 100
    else:
        assert invalid["shadow"] == 0


@pytest.mark.parametrize("lines, marked, field", [
    ({"shadow_side": "shadow_side: right\n        projector: {position: [0, 0, 0.05]}"}, "baseline_m",
     "depth.baseline_m"),  # a pose and a baseline: which one?
    ({"shadow_side": None, "baseline_m": "projector:\n          position: [0, 0, 50]"}, "position: [0, 0, 50]",
     "depth.projector.position"),  # 50 m from its lens: millimetres meant
    ({"shadow_side": None, "baseline_m": "projector: {position: [0, 0.05, 0], forward: [0, 0, 1], up: [0, 0, 2]}"},
     "projector:", "depth.projector.up"),  # up along its axis
], ids=["with-baseline", "far-away", "up-along-axis"])
def test_a_bad_projector_is_refused_at_file_line(tmp_path, lines, marked, field):
    text = _camera_text(**lines)
    bad = tmp_path / "camera.yaml"
    bad.write_text(text)
    line = next(i for i, row in enumerate(text.splitlines(), 1) if row.strip().startswith(marked))
    with pytest.raises(DescriptorError) as caught:
        load_source(bad)
    message = str(caught.value)
    assert message.startswith(f"{bad}:{line}: ") and field in message, message

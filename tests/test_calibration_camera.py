"""``hil calibrate camera``: the depth camera's dropout and noise fitted from a capture of a rig, against numbers the
test hides in the camera.

Everything real: the commbot stands in the rig's map in a pybullet DIRECT world, its left eye swapped for a camera
part (160 x 120, the catalog camera's other numbers) whose depth law is the hidden one, turned to a few headings
before the wall; each frame is rendered as the suite renders (moderngl on EGL, else TinyRenderer) and its depth
made by the camera's own failure model. The fit sees only the depth and the frame's pose (no labels), and the truth
is the test's own numbers, never the fit's.
"""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from bench.camera_calibration_coverage import camera_part
from hil.devices.calibration import apply, load_calibration
from hil.devices.catalog import load_part
from hil.devices.descriptor.camera import camera_spec
from hil.trial.calibrate.camera import fit_capture
from hil.trial.calibrate.camera_capture import virtual_frames
from hil.trial.calibrate.capture import CaptureError, capture_from_frames
from hil.trial.calibrate.fit import FitError
from hil.trial.calibrate.rig import load_rig, rig_map_text

ROOT = Path(__file__).resolve().parents[1]
WALL_X = 1.6  # the rig's face, metres ahead of the robot's start
# the hidden laws (angle50 deg, width deg, noise_z2): a small grid around the catalog's (72, 4, 0.0015)
SETTINGS = {"steep": (60.0, 4.0, 0.002), "catalog-like": (70.0, 6.0, 0.001), "early": (50.0, 3.0, 0.003)}
LN_QUARTER = math.log(0.2 / 0.8)  # the logistic at 80 % valid: incidence = angle50 + width * ln(0.2 / 0.8)


def _rig(folder: Path, wall_x: float = WALL_X, surface: str = "plaster") -> Path:
    path = folder / f"rig_{wall_x:g}.yaml"
    path.write_text("start: [0.0, 0.0, 0.0]\nwalls:\n"
                    f"  - {{name: wall, from: [{wall_x}, -6.0], to: [{wall_x}, 6.0], surface: {surface}}}\n")
    return path


def _camera_part(folder: Path, angle50: float, width: float, noise_z2: float) -> Path:
    """The catalog camera's part file, 160 x 120 pixels, with the hidden depth law."""
    path = camera_part(folder, angle50, width, noise_z2)
    text = path.read_text()
    assert "width: 160" in text and f"dropout_angle50_deg: {angle50}" in text and f"noise_z2: {noise_z2}" in text
    return path


def _render(tmp: Path, rig_path: Path, part_path: Path) -> list:
    """The left eye's frames at each heading (each frame its own index, so its own noise)."""
    return virtual_frames(load_rig(rig_path), tmp, part_path)


@pytest.fixture(scope="module")
def captures(tmp_path_factory):
    """Per setting: (the part file, the frames)."""
    out = {}
    for name, law in SETTINGS.items():
        tmp = tmp_path_factory.mktemp(name)
        part = _camera_part(tmp / "part", *law)
        out[name] = (part, _render(tmp, _rig(tmp), part))
    return out


@pytest.mark.parametrize("setting", list(SETTINGS))
def test_the_fit_holds_the_hidden_law_in_its_intervals(captures, tmp_path, setting):
    angle50, width, noise_z2 = SETTINGS[setting]
    part, frames = captures[setting]
    rig = load_rig(_rig(tmp_path))
    # the pixels the fit counts are those the renderer drew as the wall or the floor (its labels: the test's
    # ground truth, not the fit's input)
    fits, obs = fit_capture(capture_from_frames(frames, part), rig, stride=1)
    assert list(fits) == ["plaster"]
    fit = fits["plaster"]
    assert fit.pixels > 20000 and 0 < fit.valid_pixels < fit.pixels
    assert obs.left_out["contradicting"] == 0
    assert fit.angle50_ci[0] <= angle50 <= fit.angle50_ci[1], (fit.angle50_deg, fit.angle50_ci)
    assert fit.width_ci[0] <= width <= fit.width_ci[1], (fit.width_deg, fit.width_ci)
    assert fit.noise_z2_ci[0] <= noise_z2 <= fit.noise_z2_ci[1], (fit.noise_z2, fit.noise_z2_ci)
    assert abs(fit.bias_m) < 0.0005
    law80 = angle50 + width * LN_QUARTER  # the hidden law's own 80 % angle
    assert fit.angle80_ci[0] <= law80 <= fit.angle80_ci[1], (fit.angle80_deg, fit.angle80_ci, law80)
    assert abs(fit.angle80_measured_deg - law80) < 1.5, (fit.angle80_measured_deg, law80)
    # the intervals are tight enough to mean something
    assert fit.angle50_ci[1] - fit.angle50_ci[0] < 3.0 and fit.width_ci[1] / fit.width_ci[0] < 1.6


def test_the_fitted_pixels_are_the_wall_and_the_floor_the_renderer_drew(captures, tmp_path):
    """The geometry's pixels against the renderer's labels (the ground truth the fit never reads)."""
    from hil.firmware_sim.render.scene import FLOOR, WALL
    from hil.trial.calibrate.camera_geometry import NOTHING, PixelGrid, expected_pixels

    part, frames = captures["steep"]
    rig = load_rig(_rig(tmp_path))
    capture = capture_from_frames(frames, part)
    grid = PixelGrid.of(capture.pinhole, 1)
    on_rig = drawn = 0
    for frame, taken in zip(capture.frames, frames):
        seen = expected_pixels(rig, grid, frame.position, frame.rotation, None)
        labels = taken["labels"][grid.rows, grid.cols]
        want = np.where(seen.met == 0, WALL, np.where(seen.met == 1, FLOOR, -1))
        on = (seen.met != NOTHING) & (seen.z <= 8.0)  # within the camera's max range (the renderer's far plane
        # is 12 m: beyond it the floor is drawn as nothing)
        on_rig += int(on.sum())
        drawn += int((labels[on] == want[on]).sum())
    assert on_rig > 30000 and drawn == on_rig


def test_a_capture_whose_depth_is_all_valid_is_refused(tmp_path):
    """A camera that never drops a pixel on the rig (its angle50 beyond any incidence): nothing shows the dropout."""
    part = _camera_part(tmp_path / "part", 175.0, 1.0, 0.002)
    frames = _render(tmp_path, _rig(tmp_path), part)
    with pytest.raises(FitError, match=r"surface 'plaster': all of its \d+ pixels are valid, none shows the dropout"):
        fit_capture(capture_from_frames(frames, part), load_rig(_rig(tmp_path)), stride=2)


def test_a_rig_at_the_wrong_distance_is_refused(captures, tmp_path):
    part, frames = captures["steep"]
    with pytest.raises(FitError, match=r"valid pixels on the rig read farther than .* the rig's distances or the "
                                       r"camera's pose are wrong"):
        fit_capture(capture_from_frames(frames, part), load_rig(_rig(tmp_path, wall_x=WALL_X + 0.3)), stride=2)


def test_a_surface_the_rig_lacks_and_a_view_without_the_rig_are_refused(captures, tmp_path):
    part, frames = captures["steep"]
    rig = load_rig(_rig(tmp_path))
    capture = capture_from_frames(frames, part)
    with pytest.raises(FitError, match=r"rig_1.6.yaml has no face of surface 'glass': it cannot calibrate it "
                                       r"\(its surfaces: plaster"):
        fit_capture(capture, rig, stride=4, only=["glass"])
    for frame in capture.frames:  # the camera turned to the sky
        frame.rotation = np.array([[0.0, 0.0, -1.0], [0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    with pytest.raises(FitError, match=r"camera camera/camera\): no pixel of its 4 frames sees a face of .* "
                                       r"or the floor"):
        fit_capture(capture, rig, stride=4)


def test_a_tum_capture_is_fitted_by_the_command_and_its_cal_yaml_calibrates_the_camera(captures, tmp_path,
                                                                                        capsys):
    """The virtual capture written as a TUM RGB-D folder (depth PNGs, camera.yaml, groundtruth.txt with each
    frame's optical pose), fitted by `hil calibrate camera`; the CAL.yaml it writes loads, and applied to the
    catalog camera gives its depth the fitted numbers."""
    from scipy.spatial.transform import Rotation

    from camera_recordings import write_tum
    from hil.cli import main
    from hil.trial.calibrate.capture import frame_lens_pose

    angle50, width, noise_z2 = SETTINGS["early"]
    part, frames = captures["early"]
    folder = tmp_path / "capture"
    stamps = [100.0 + 0.5 * k for k in range(len(frames))]
    write_tum(folder, [np.zeros((120, 160, 3), np.uint8)] * len(frames), [f["depth"] for f in frames], stamps,
              depth_lag_s=0.0)
    k = frames[0]["intrinsics"]
    (folder / "camera.yaml").write_text(f"width: 160\nheight: 120\nfx: {k['fx']}\nfy: {k['fy']}\ncx: {k['cx']}\n"
                                        f"cy: {k['cy']}\n")
    lines = ["# timestamp tx ty tz qx qy qz qw"]
    for stamp, frame in zip(stamps, frames):
        position, lens = frame_lens_pose(frame["pose"])
        optical = np.column_stack([-lens[:, 1], -lens[:, 2], lens[:, 0]])  # x right, y down, z forward
        q = Rotation.from_matrix(optical).as_quat()
        lines.append(f"{stamp:.6f} " + " ".join(f"{v:.9f}" for v in (*position, *q)))
    (folder / "groundtruth.txt").write_text("\n".join(lines) + "\n")
    out = tmp_path / "cal"
    assert main(["calibrate", "camera", str(folder), "--rig", str(_rig(tmp_path)), "--out", str(out),
                 "--part", str(part), "--stride", "2"]) == 0
    printed = capsys.readouterr()
    assert "surface plaster:" in printed.out and "calibrate camera: frame 4 of 4" in printed.err
    assert (out / "camera_calibration.png").stat().st_size > 10000
    (entry,) = load_calibration(out / "CAL.yaml").entries
    assert (entry.part, entry.sensor, entry.camera) == ("camera", "camera", True)
    fit = entry.fit
    assert fit["angle50_ci_deg"][0] <= angle50 <= fit["angle50_ci_deg"][1]
    assert fit["width_ci_deg"][0] <= width <= fit["width_ci_deg"][1]
    assert fit["noise_z2_ci"][0] <= noise_z2 <= fit["noise_z2_ci"][1]
    assert fit["angle80_ci_deg"][0] <= angle50 + width * LN_QUARTER <= fit["angle80_ci_deg"][1]
    depth = camera_spec(next(s for s in apply(load_part("camera"), (entry,)).sensors if s.kind == "camera").params).depth
    assert (depth.dropout_angle50_deg, depth.dropout_width_deg, depth.noise_z2) == (
        entry.params["depth"]["dropout_angle50_deg"], entry.params["depth"]["dropout_width_deg"],
        entry.params["depth"]["noise_z2"])
    assert (depth.min_range_m, depth.max_range_m, depth.baseline_m) == (0.2, 8.0, 0.05)  # the part's, kept
    # a profile's calibration: the virtual commbot's two eyes are built with the fitted numbers
    from hil.firmware_sim import load_assembly
    from hil.firmware_sim.assembly import calibrated

    assembly, applied, warnings = calibrated(load_assembly("commbot"), load_calibration(out / "CAL.yaml"))
    assert not warnings and len(applied) == 2 and all("sensor camera: depth" in line for line in applied)
    eyes = [camera_spec(s.params).depth for part in assembly.parts if getattr(part, "descriptor", None) is not None
            and part.descriptor.name == "camera" for s in part.descriptor.sensors if s.kind == "camera"]
    assert [e.dropout_angle50_deg for e in eyes] == [entry.params["depth"]["dropout_angle50_deg"]] * 2


def test_bad_captures_are_refused_in_one_line(tmp_path, capsys):
    import cv2

    from hil.cli import main

    rig = str(_rig(tmp_path))
    missing = tmp_path / "nothing"
    assert main(["calibrate", "camera", str(missing), "--rig", rig, "--out", str(tmp_path / "o")]) != 0
    assert f"{missing}: no such capture folder" in capsys.readouterr().err
    folder = tmp_path / "empty"
    folder.mkdir()
    assert main(["calibrate", "camera", str(folder), "--rig", rig, "--out", str(tmp_path / "o")]) != 0
    assert f"{folder}: no depth.txt" in capsys.readouterr().err
    (folder / "depth.txt").write_text("1.0 depth/a.png\n")
    assert main(["calibrate", "camera", str(folder), "--rig", rig, "--out", str(tmp_path / "o")]) != 0
    assert "no groundtruth.txt (each frame's pose) and no --pose" in capsys.readouterr().err
    (folder / "depth").mkdir()
    assert cv2.imwrite(str(folder / "depth" / "a.png"), np.full((240, 320), 5000, np.uint16))
    (folder / "groundtruth.txt").write_text("# poses\n1.0 0 0 1 0 0 0\n")
    with pytest.raises(CaptureError, match=r"groundtruth.txt:2: expected 'timestamp tx ty tz qx qy qz qw'"):
        from hil.trial.calibrate.capture import read_tum_capture
        read_tum_capture(folder)
    assert main(["calibrate", "camera", str(folder), "--rig", rig, "--out", str(tmp_path / "o"),
                 "--pose", "0,0,1,0"]) != 0
    assert "the folder has its poses and --pose gives one too" in capsys.readouterr().err


def test_the_virtual_capture_command_and_the_fit_from_a_fresh_checkout(tmp_path, capsys):
    """The documented example: `hil calibrate camera-capture` of the shipped corridor rig by an eye whose depth
    numbers are hidden in a part file, then `hil calibrate camera` on the folder it wrote."""
    from hil.cli import main

    angle50, width, noise_z2 = 62.0, 5.0, 0.002
    part = _camera_part(tmp_path / "part", angle50, width, noise_z2)
    rig = ROOT / "hil" / "examples" / "rig_corridor.yaml"
    assert main(["calibrate", "camera-capture", "--rig", str(rig), "--out", str(tmp_path / "capture"),
                 "--part", str(part)]) == 0
    assert main(["calibrate", "camera", str(tmp_path / "capture"), "--rig", str(rig), "--out",
                 str(tmp_path / "cal" / "CAL.yaml"), "--part", str(part), "--stride", "1"]) == 0
    assert "surface plaster:" in capsys.readouterr().out
    fit = load_calibration(tmp_path / "cal" / "CAL.yaml").entries[0].fit
    assert fit["angle50_ci_deg"][0] <= angle50 <= fit["angle50_ci_deg"][1]
    assert fit["width_ci_deg"][0] <= width <= fit["width_ci_deg"][1]
    assert fit["noise_z2_ci"][0] <= noise_z2 <= fit["noise_z2_ci"][1]


def test_each_surface_is_fitted_with_its_own_law_and_written_for_the_camera(tmp_path):
    """A wall half glass (y < 0) and half plaster, the floor plaster; the camera's hidden law on plaster is its
    depth params', on glass a measured law in its depth.surfaces (the part states both). Each surface's truth lies
    in its own intervals, the two angle50 intervals lie apart, and the CAL.yaml applied to the catalog camera puts
    the glass law into its depth.surfaces."""
    from hil.trial.calibrate.camera import write_outputs

    plaster, glass = (60.0, 4.0, 0.002), (42.0, 3.0, 0.003)
    part = _camera_part(tmp_path / "part", *plaster)
    text = part.read_text().replace("        shadow_side: right",
                                    "        shadow_side: right\n        surfaces: {glass: {dropout_angle50_deg: "
                                    f"{glass[0]}, dropout_width_deg: {glass[1]}, noise_z2: {glass[2]}}}}}")
    assert "surfaces: {glass" in text
    part.write_text(text)
    rig_path = tmp_path / "rig_two.yaml"
    rig_path.write_text("start: [0.0, 0.0, 0.0]\nwalls:\n"
                        f"  - {{name: window, from: [{WALL_X}, -6.0], to: [{WALL_X}, 0.0], surface: glass}}\n"
                        f"  - {{name: wall, from: [{WALL_X}, 0.0], to: [{WALL_X}, 6.0], surface: plaster}}\n")
    rig = load_rig(rig_path)
    capture = capture_from_frames(virtual_frames(rig, tmp_path, part, headings_deg=(-50.0, -30.0, 0.0, 30.0, 50.0)),
                                  part)
    fits, obs = fit_capture(capture, rig, stride=1)
    assert set(fits) == {"glass", "plaster"}
    for name, (angle50, width, noise_z2) in (("plaster", plaster), ("glass", glass)):
        fit = fits[name]
        assert fit.angle50_ci[0] <= angle50 <= fit.angle50_ci[1], (name, fit.angle50_deg, fit.angle50_ci)
        assert fit.width_ci[0] <= width <= fit.width_ci[1], (name, fit.width_deg, fit.width_ci)
        assert fit.noise_z2_ci[0] <= noise_z2 <= fit.noise_z2_ci[1], (name, fit.noise_z2, fit.noise_z2_ci)
        assert fit.angle80_ci[0] <= angle50 + width * LN_QUARTER <= fit.angle80_ci[1], name
    assert fits["glass"].angle50_ci[1] < fits["plaster"].angle50_ci[0]
    assert obs.left_out["specular"] > 0  # glass seen head on saturates: left out, not counted as dropout
    write_outputs(fits, obs, capture, rig, tmp_path / "CAL.yaml")
    (entry,) = load_calibration(tmp_path / "CAL.yaml").entries
    depth = camera_spec(next(s for s in apply(load_part("camera"), (entry,)).sensors if s.kind == "camera").params).depth
    (measured,) = depth.surfaces
    assert measured.name == "glass"
    assert measured.dropout_angle50_deg == entry.surfaces["glass"]["dropout_angle50_deg"]
    assert depth.dropout_angle50_deg == entry.params["depth"]["dropout_angle50_deg"]


@pytest.mark.parametrize("text, says", [
    ("height: 50", "rig wall #1: height must be a number within 0.1..20, not 50"),
    ("height: .nan", "rig wall #1: height must be a number within 0.1..20, not nan"),
])
def test_a_face_height_out_of_bounds_is_refused_at_its_line(tmp_path, text, says):
    from hil.devices.yaml_source import ConfigError

    path = tmp_path / "rig.yaml"
    path.write_text(f"start: [0, 0, 0]\nwalls:\n  - {{from: [1.6, -6], to: [1.6, 6], {text}}}\n")
    with pytest.raises(ConfigError, match=rf"rig.yaml:3: {says}"):
        load_rig(path)
    path.write_text("start: [0, 0, 0]\nwalls:\n  - {from: [1.6, -6], to: [1.6, 6], height: 2.5}\n")
    assert load_rig(path).faces[0].height_m == 2.5

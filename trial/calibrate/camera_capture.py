"""A virtual capture of a rig (``hil calibrate camera-capture``): the commbot stood at the rig's start in the rig's
map (rig.rig_map_text), its left eye (optionally swapped for another camera part: a part file with other depth
numbers, the stand-in for a real camera whose numbers are unknown) turned to a few headings, one frame rendered at
each (the world's renderer and the camera's own failure model), written as a TUM RGB-D folder: depth.txt and
16-bit depth PNGs, rgb.txt and colour PNGs, camera.yaml, and groundtruth.txt with each frame's lens pose (the
optical frame: x right, y down, z forward) in the rig frame. ``hil calibrate camera`` fits it as it fits a real
camera's capture: only the depth and the poses are read.
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .rig import Rig, rig_map_text

CAMERA_PART_ID = 43  # the commbot's left eye (config/robots/commbot.yaml)
HEADINGS_DEG = (0.0, 30.0, 50.0, 65.0)  # turned from the start: the face seen from head on to grazing
FRAME_STEP_S = 0.5  # the stamps written, apart


def virtual_frames(rig: Rig, folder: Path, part: Path | None = None, headings_deg=HEADINGS_DEG,
                   frames_per_heading: int = 1, seed: int = 0,
                   progress: Callable[[str], None] = lambda line: None) -> list[dict[str, Any]]:
    """The left eye's frames (t, rgb, depth, intrinsics, pose, labels) at each heading from the rig's start; each
    frame its own index, so its own noise. ``folder`` takes the rig's map."""
    from hil.devices.catalog import load_source
    from hil.firmware_sim import hotplug, load_assembly
    from hil.firmware_sim.embodied.embody import embody

    map_path = folder / "rig_map.yaml"
    map_path.write_text(rig_map_text(rig))
    world = embody(load_assembly("commbot"), clock="sim", watchdog_s=0.0, map_name=str(map_path), seed=seed)
    try:
        if part is not None:
            hotplug.swap(world.device, CAMERA_PART_ID, load_source(Path(part), name_is_stem=False))
        camera = world.cameras[CAMERA_PART_ID].camera()
        x, y, yaw = rig.start
        frames, k = [], 0
        total = len(headings_deg) * frames_per_heading
        for heading in headings_deg:
            world.robot.place(x, y, yaw + math.radians(heading))
            for _ in range(frames_per_heading):
                frame = camera.render(k / camera.spec.rate_hz, k)
                frames.append({key: frame[key] for key in ("t", "rgb", "depth", "intrinsics", "pose", "labels", "surfaces", "surface_names") if key in frame})
                k += 1
                progress(f"calibrate camera-capture: frame {k} of {total} (heading {heading:g} deg)")
        return frames
    finally:
        world.close()


def write_tum_capture(folder: Path, frames: list[dict[str, Any]], depth_scale: float = 5000.0) -> Path:
    """The frames as a TUM RGB-D folder (module docstring)."""
    from scipy.spatial.transform import Rotation

    try:
        import cv2
    except ImportError:
        from .capture import CaptureError

        raise CaptureError("writing a capture needs OpenCV: pip install 'hil[camera]' (opencv-python-headless)") \
            from None

    from .capture import frame_lens_pose

    for sub in ("rgb", "depth"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    rgb_lines, depth_lines, truth = ["# timestamp filename"], ["# timestamp filename"], [
        "# timestamp tx ty tz qx qy qz qw (the optical frame: x right, y down, z forward; rig frame, z up)"]
    for k, frame in enumerate(frames):
        stamp = f"{1.0 + FRAME_STEP_S * k:.6f}"
        depth = frame["depth"]
        units = np.where(np.isfinite(depth), np.round(np.nan_to_num(depth) * depth_scale), 0)
        cv2.imwrite(str(folder / "depth" / f"{stamp}.png"), np.clip(units, 0, 65535).astype(np.uint16))
        rgb = frame["rgb"] if frame["rgb"] is not None else np.zeros((*depth.shape, 3), np.uint8)
        cv2.imwrite(str(folder / "rgb" / f"{stamp}.png"), np.ascontiguousarray(rgb[..., ::-1]))
        rgb_lines.append(f"{stamp} rgb/{stamp}.png")
        depth_lines.append(f"{stamp} depth/{stamp}.png")
        position, lens = frame_lens_pose(frame["pose"])
        optical = np.column_stack([-lens[:, 1], -lens[:, 2], lens[:, 0]])
        q = Rotation.from_matrix(optical).as_quat()  # x, y, z, w
        truth.append(f"{stamp} " + " ".join(f"{v:.9f}" for v in (*position, *q)))
    k = frames[0]["intrinsics"]
    (folder / "camera.yaml").write_text(
        f"width: {k['width']}\nheight: {k['height']}\nfx: {k['fx']}\nfy: {k['fy']}\ncx: {k['cx']}\ncy: {k['cy']}\n"
        f"depth_scale: {depth_scale:g}\n")
    for name, lines in (("rgb.txt", rgb_lines), ("depth.txt", depth_lines), ("groundtruth.txt", truth)):
        (folder / name).write_text("\n".join(lines) + "\n")
    return folder


def record_capture(rig: Rig, folder: Path, part: Path | None = None, headings_deg=HEADINGS_DEG,
                   progress: Callable[[str], None] = lambda line: None) -> Path:
    """A virtual capture of the rig written to ``folder``; its path."""
    folder.mkdir(parents=True, exist_ok=True)
    return write_tum_capture(folder, virtual_frames(rig, folder, part, headings_deg, progress=progress))

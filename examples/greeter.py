"""The greeter: finds the nearest person in the head camera's depth image, turns the head to them and greets.

It uses what a real robot has: the depth image and the robot model (the camera's pose in the base frame from the
joints' readings), no labels and no ground truth, so the same file runs on the physical commbot's RGB-D eye.

    hil trial examples/greeter.py --map arcade --scenario child_interacts --start 7,0,3.1416 --duration 60

How it finds people. Every valid depth pixel is put into the base frame (pinhole back-projection, then the
camera's placement); points between ``FLOOR_CLEARANCE_M`` and ``MAX_HEIGHT_M`` above the floor and within
``MAX_RANGE_M`` are obstacles. Per degree of bearing the nearest obstacle is kept; neighbouring bearings whose
ranges differ by less than ``SAME_BLOB_M`` form a blob. A blob is a person when it is as wide as a person
(``PERSON_WIDTH_M``) and its top is a person's height (``PERSON_TOP_M``: walls go higher, benches and the
fountain's rim stay lower). The head turns to the nearest person's centre, seen from the neck's axis;
``robot.mode`` is "greet" while someone is within ``GREET_RANGE_M``, "look" while someone is in view farther
away, "wait" otherwise; each change to "greet" or "look" is printed with the person's range and bearing.

On a camera without depth (a UVC webcam, an RGB-only recording: ``camera.has_depth`` is False from the start) it
cannot tell a person from a poster or how far anyone is: it says so once, keeps the head still and waits
(``robot.mode`` "no depth"), instead of failing on the first frame.

    hil run examples/greeter.py --profile my_robot.yaml   # cameras: {head_camera: "file:recordings/hall"}
"""
from __future__ import annotations

import math

import numpy as np

CAMERA = "head_camera"
NECK = "head.neck_yaw"
HZ = 10.0
FLOOR_CLEARANCE_M = 0.15
MAX_HEIGHT_M = 2.6
MAX_RANGE_M = 6.0
SAME_BLOB_M = 0.25
PERSON_WIDTH_M = (0.12, 1.0)
PERSON_TOP_M = (0.8, 2.1)
GREET_RANGE_M = 1.6
MAX_NECK_RAD = 1.2
TURN_GAIN = 0.6  # of the remaining bearing error per tick: smooth, and no overshoot on the camera's lag


def obstacle_points(frame, camera_in_base) -> np.ndarray:
    """(N, 3) base-frame points of the valid depth pixels that are neither floor nor ceiling nor far away."""
    depth, k = frame.depth, frame.intrinsics
    v, u = np.nonzero(np.isfinite(depth))
    z = depth[v, u].astype(float)
    body = np.stack([z, -(u - k.cx) / k.fx * z, -(v - k.cy) / k.fy * z], axis=-1)  # x forward, y left, z up
    rotation, translation = np.asarray(camera_in_base.rotation), np.asarray(camera_in_base.translation)
    points = body @ rotation.T + translation
    keep = (points[:, 2] > FLOOR_CLEARANCE_M) & (points[:, 2] < MAX_HEIGHT_M) & \
        (np.hypot(points[:, 0], points[:, 1]) < MAX_RANGE_M)
    return points[keep]


def people(points: np.ndarray, origin_xy=(0.0, 0.0)) -> list[tuple[float, float]]:
    """(range m, bearing rad) of each person-like blob among ``points``, seen from ``origin_xy``, nearest first."""
    if not len(points):
        return []
    dx, dy = points[:, 0] - origin_xy[0], points[:, 1] - origin_xy[1]
    ranges, bearings = np.hypot(dx, dy), np.arctan2(dy, dx)
    bins = np.round(np.degrees(bearings)).astype(int)
    nearest: dict[int, float] = {}
    for b, r in zip(bins, ranges):
        if r < nearest.get(b, math.inf):
            nearest[b] = r
    found = []
    for blob in _blobs(sorted(nearest.items())):
        lo, hi = blob[0][0], blob[-1][0]
        r = min(r for _, r in blob)
        width = math.radians(hi - lo + 1) * r
        near = (bins >= lo) & (bins <= hi) & (ranges < r + 0.4)
        top = float(points[near, 2].max())
        if PERSON_WIDTH_M[0] <= width <= PERSON_WIDTH_M[1] and PERSON_TOP_M[0] <= top <= PERSON_TOP_M[1]:
            found.append((r, math.radians((lo + hi) / 2.0)))
    return sorted(found)


def _blobs(by_bearing: list[tuple[int, float]]) -> list[list[tuple[int, float]]]:
    blobs: list[list[tuple[int, float]]] = []
    for b, r in by_bearing:
        if blobs and b == blobs[-1][-1][0] + 1 and abs(r - blobs[-1][-1][1]) < SAME_BLOB_M:
            blobs[-1].append((b, r))
        else:
            blobs.append([(b, r)])
    return blobs


def _link(robot, part_id: int) -> int:
    return next(i for i, link in enumerate(robot.model.links) if link.bus_id == part_id)


def main(robot) -> None:
    camera, neck = robot.sensors[CAMERA], robot.joints[NECK]
    if not camera.has_depth:
        return without_depth(robot, camera, neck)
    camera_link = _link(robot, camera.part_key)
    neck_link = _link(robot, neck.part_key)
    robot.mode = "wait"
    for _ in robot.loop(hz=HZ):
        frame = camera.frame()
        neck_xy = robot.dynamics.placement(neck_link).translation[:2]
        seen = people(obstacle_points(frame, robot.dynamics.placement(camera_link)), neck_xy)
        if not seen:
            robot.mode = "wait"
            continue
        distance, bearing = seen[0]
        mode = "greet" if distance < GREET_RANGE_M else "look"
        if mode != robot.mode:
            print(f"greeter: {mode}: a person {distance:.2f} m away at bearing {bearing:+.2f} rad "
                  f"(t={frame.t:.2f} s)", flush=True)
        robot.mode = mode
        target = neck.position + TURN_GAIN * (bearing - neck.position)
        neck.target = max(-MAX_NECK_RAD, min(MAX_NECK_RAD, target))


def without_depth(robot, camera, neck) -> None:
    """What the greeter does with an RGB-only camera: says so once, holds the head where it is and waits."""
    print(f"greeter: camera {camera.name!r} has no depth ({camera.device or 'it gives none'}): it cannot find "
          "people by range, so the head stays still", flush=True)
    robot.mode = "no depth"
    hold = neck.position
    for _ in robot.loop(hz=HZ):
        neck.target = hold

"""Sensor models against known geometry in plain pybullet DIRECT scenes (no robot, no bus).

The statistical tests predict what the model must do from the descriptor's numbers and analytic ray-plane
geometry, independently of the model's code path: for a flat wall every ray's distance and incidence angle are
known, each ray survives with probability (1 - logistic dropout) if it lies within [min, max], the sensor
reports the nearest survivor, and a reading is invalid when no ray survives or the noisy value leaves
[min, max]. Tolerances are binomial (4 standard deviations plus a small allowance) or 3 sigma/sqrt(N) on means
plus the 1 mm register resolution; the generator is seeded, so each test is deterministic and does not flake.
"""
from __future__ import annotations

import collections
import math
from dataclasses import replace

import numpy as np
import pybullet as pb
import pytest

from hil.devices.catalog import load_part, part_names
from hil.devices.descriptor.schema import Pose, Sensor, Shape
from hil.firmware_sim.sensors import (
    CAUSES,
    MODELLED_KINDS,
    ContactSensorModel,
    RangeRingModel,
    RingReading,
    link_frame_pose,
    sensor_model,
)
from hil.firmware_sim.sensors.contact import nearest_shape
from hil.firmware_sim.sensors.geometry import rpy_matrix, signed_distance

IDENTITY = (0.0, 0.0, 0.0, 1.0)
ORIGIN = (0.0, 0.0, 0.0)
RAW_UNIT_M = 0.001

IR_PARAMS = {
    "variant": "infrared", "yaw_deg": [0], "origin_radius_m": 0.2, "origin_z_m": 0.025, "min_range_m": 0.03,
    "max_range_m": 4.0, "no_target_raw": 65535, "dropout_angle50_deg": 55.0, "dropout_width_deg": 8.0,
    "noise_sigma_m": [0.003, 0.01], "update_hz": 10.0,
}


# scenes
@pytest.fixture
def client():
    """A fresh DIRECT pybullet world, gravity down, disconnected afterwards."""
    cid = pb.connect(pb.DIRECT)
    pb.setGravity(0, 0, -9.81, physicsClientId=cid)
    try:
        yield cid
    finally:
        pb.disconnect(cid)


def static_box(cid: int, half_extents, position, orientation=IDENTITY) -> int:
    shape = pb.createCollisionShape(pb.GEOM_BOX, halfExtents=list(half_extents), physicsClientId=cid)
    return pb.createMultiBody(0, shape, basePosition=list(position), baseOrientation=list(orientation),
                              physicsClientId=cid)


def wall(cid: int, face_point, tilt_deg: float = 0.0, half=(0.05, 20.0, 20.0)) -> tuple[int, np.ndarray]:
    """A thick static wall whose front face passes through ``face_point`` facing -x turned by ``tilt_deg``
    about z, so a ray along +x meets it at incidence ``tilt_deg``. Returns the body and the face normal."""
    t = math.radians(tilt_deg)
    inward = np.array([math.cos(t), math.sin(t), 0.0])
    centre = np.asarray(face_point, dtype=float) + inward * half[0]
    body = static_box(cid, half, centre, pb.getQuaternionFromEuler([0, 0, t]))
    return body, -inward


def ring_model(seed: int = 1, **overrides) -> RangeRingModel:
    """The catalog ring with a round cone (the geometry tests reason about a round cone; the catalog's flattened
    one is tested on its own in test_elliptical_cone_is_narrower_vertically and test_catalog_ring_is_flattened)."""
    sensor = load_part("range_ring").sensors[0]
    round_cone = {"cone_vertical_half_angle_deg": sensor.params["cone_half_angle_deg"]}
    return RangeRingModel(replace(sensor, params={**sensor.params, **round_cone, **overrides}), seed)


def ir_model(seed: int = 1, **overrides) -> RangeRingModel:
    return RangeRingModel(Sensor("ir", "range_ring", "ring", {**IR_PARAMS, **overrides}), seed)


def measure_n(model: RangeRingModel, cid: int, n: int, position=ORIGIN, orientation=IDENTITY) -> list[RingReading]:
    return [model.measure(cid, position, orientation) for _ in range(n)]


# analytic predictions for a flat wall
def plane_rays(model: RangeRingModel, point, normal, position=ORIGIN, orientation=IDENTITY):
    """Each ray's distance to the wall plane (inf when it points away or the hit lies beyond max range) and
    its incidence angle in degrees."""
    origins, dirs = model.world_rays(position, orientation)
    normal = np.asarray(normal, dtype=float)
    towards = dirs @ normal
    with np.errstate(divide="ignore", invalid="ignore"):
        dist = ((np.asarray(point) - origins) @ normal) / towards
    dist = np.where((towards < 0) & (dist > 0) & (dist <= model.config.max_range_m), dist, np.inf)
    return dist, np.degrees(np.arccos(np.clip(np.abs(towards), 0.0, 1.0)))


def predict_sensor(model: RangeRingModel, dist: np.ndarray, incidence: np.ndarray) -> tuple[float, float]:
    """For one sensor's rays: (probability the reading is invalid, expected valid range ignoring truncation).

    Rays are independent given the geometry: ray k is the reported echo with probability
    s_k * prod_{j nearer} (1 - s_j), s being its survival probability; the reading is then rejected as noise
    with the probability that d_k + sigma(d_k) z leaves [min, max]."""
    cfg = model.config
    order = np.argsort(dist)
    p_none_nearer, p_invalid, mean_sum, p_valid = 1.0, 0.0, 0.0, 0.0
    for k in order:
        d = dist[k]
        if not np.isfinite(d) or d < cfg.min_range_m:
            continue
        survive = 1.0 - float(model.dropout_probability(incidence[k]))
        p_here = p_none_nearer * survive
        sigma = float(model.sigma_m(d))
        reject = normal_cdf((cfg.min_range_m - d) / sigma) + 1.0 - normal_cdf((cfg.max_range_m - d) / sigma)
        p_invalid += p_here * reject
        p_valid += p_here * (1.0 - reject)
        mean_sum += p_here * (1.0 - reject) * d
        p_none_nearer *= 1.0 - survive
    return p_invalid + p_none_nearer, (mean_sum / p_valid if p_valid > 0 else math.nan)


def normal_cdf(x: float) -> float:
    return 0.5 * (1.0 + math.erf(x / math.sqrt(2.0)))


def binomial_tolerance(p: float, n: int, slack: float = 0.01) -> float:
    return 4.0 * math.sqrt(p * (1.0 - p) / n) + slack


# parameters
def test_catalog_ring_builds_its_documented_ray_pattern():
    """12 ultrasonic sensors, 13 rays each: the axis along the yaw, the cone's edge exactly at the half angle,
    all rays starting on the outer face at half height."""
    model = ring_model()
    assert (model.rays_per_sensor, model.n_rays) == (13, 156)
    dirs = model.directions_local.reshape(12, 13, 3)
    origins = model.origins_local.reshape(12, 13, 3)
    for i, yaw in enumerate(np.radians(model.config.yaw_deg)):
        axis = np.array([math.cos(yaw), math.sin(yaw), 0.0])
        np.testing.assert_allclose(dirs[i, 0], axis, atol=1e-12)
        off_axis = np.degrees(np.arccos(np.clip(dirs[i] @ axis, -1, 1)))
        np.testing.assert_allclose(sorted(off_axis), [0.0] + [7.5] * 4 + [15.0] * 8, atol=1e-5)
        assert dirs[i, :, 2].min() == pytest.approx(-math.sin(math.radians(15.0)))  # the cone's lowest edge
        np.testing.assert_allclose(origins[i], np.tile([0.2 * axis[0], 0.2 * axis[1], 0.025], (13, 1)), atol=1e-12)
    np.testing.assert_allclose(np.linalg.norm(model.directions_local, axis=1), 1.0)
    assert ir_model().n_rays == 1


def test_catalog_ring_is_flattened():
    """The catalog ring's beam is 15 degrees wide and 4 high, so a ring 0.19 m above the floor does not see it."""
    model = RangeRingModel(load_part("range_ring").sensors[0], 1)
    assert np.degrees(np.arcsin(model.directions_local[:, 2])).min() == pytest.approx(-4.0)


def test_elliptical_cone_is_narrower_vertically():
    """With cone_vertical_half_angle_deg 4 the rays span +-15 degrees horizontally and +-4 vertically."""
    model = ring_model(yaw_deg=[0], registers=None, cone_vertical_half_angle_deg=4.0)
    dirs = model.directions_local
    assert np.degrees(np.arctan2(dirs[:, 1], dirs[:, 0])).max() == pytest.approx(15.0)
    assert np.degrees(np.arcsin(dirs[:, 2])).max() == pytest.approx(4.0)
    assert np.degrees(np.arcsin(dirs[:, 2])).min() == pytest.approx(-4.0)


@pytest.mark.parametrize("change, param", [
    ({"max_range_m": None}, "max_range_m"),
    ({"yaw_deg": "0, 30"}, "yaw_deg"),
    ({"yaw_deg": []}, "yaw_deg"),
    ({"noise_sigma_m": [0.003]}, "noise_sigma_m"),
    ({"noise_sigma_m": [0.003, -0.01]}, "noise_sigma_m"),
    ({"variant": "laser"}, "variant"),
    ({"cone_half_angle_deg": None}, "cone_half_angle_deg"),
    ({"cone_vertical_half_angle_deg": 95.0}, "cone_vertical_half_angle_deg"),
    ({"dropout_width_deg": 0}, "dropout_width_deg"),
    ({"min_range_m": True}, "min_range_m"),
    ({"min_range_m": 5.0}, "max_range_m"),
    ({"no_target_raw": 65535.0}, "no_target_raw"),
    ({"registers": ["range_00"]}, "registers"),
    ({"invalid_counters": {"no_hit": "x"}}, "invalid_counters"),
    ({"invalid_raw": {"angle": 65535}}, "invalid_raw"),  # the no-target code: the cause could not be told
    ({"invalid_raw": {"angle": 3000}}, "invalid_raw"),  # a range the ring can measure (3 m)
    ({"invalid_raw": {"no_hit": 65534}}, "invalid_raw"),  # no_hit is no_target_raw
])
def test_ring_params_are_validated_naming_sensor_and_param(change, param):
    sensor = load_part("range_ring").sensors[0]
    params = {k: v for k, v in {**sensor.params, **change}.items() if v is not None}
    with pytest.raises(ValueError, match=rf"'ring'.*'{param}'"):
        RangeRingModel(replace(sensor, params=params), seed=0)


def test_every_catalog_sensor_of_a_modelled_kind_builds():
    """The catalog's own params pass validation, and every contact zone names a collision its body has."""
    built = collections.Counter()
    for name in part_names():
        part = load_part(name)
        for sensor in part.sensors:
            model = sensor_model(sensor, seed=0)
            assert (model is None) == (sensor.kind not in MODELLED_KINDS)
            if isinstance(model, ContactSensorModel):
                model.check_collisions(part.body(sensor.body).collisions)
            built[sensor.kind] += model is not None
    assert built["range_ring"] == 1 and built["contact"] == 4


def test_catalog_params_are_kept():
    cfg = ring_model().config
    assert cfg.variant == "ultrasonic" and cfg.no_target_raw == 65535 and cfg.noise_sigma_m == (0.003, 0.01)
    assert cfg.registers[0] == "range_00" and cfg.invalid_counters["angle"] == "invalid_angle"
    assert cfg.update_period_s == pytest.approx(0.1)


# ranges
@pytest.mark.parametrize("make", [ir_model, ring_model], ids=["infrared", "ultrasonic"])
def test_wall_at_known_distance_reads_within_noise(client, make):
    """Sensor 0 faces a wall 1.3 m from its origin. Single readings lie within 5 sigma (+1 mm) of the
    predicted nearest echo, the mean of N within 3 sigma/sqrt(N) + 1 mm; raw values are millimetres."""
    model = make()
    point = (1.5, 0.0, 0.0)
    _, normal = wall(client, point)
    dist, inc = plane_rays(model, point, normal)
    _, expected = predict_sensor(model, dist[:model.rays_per_sensor], inc[:model.rays_per_sensor])
    assert expected == pytest.approx(1.3, abs=1e-3)
    sigma = float(model.sigma_m(1.3))
    n = 400
    values = []
    for reading in measure_n(model, client, n):
        assert reading.cause[0] is None
        assert reading.raw[0] == round(reading.range_m[0] / RAW_UNIT_M) < 65535
        assert abs(reading.raw[0] * RAW_UNIT_M - expected) <= 5 * sigma + RAW_UNIT_M
        values.append(reading.raw[0] * RAW_UNIT_M)
    assert abs(np.mean(values) - expected) <= 3 * sigma / math.sqrt(n) + RAW_UNIT_M
    # the noise is there, at the size the params give: both models are configured sigma = 0.003 + 0.01 r
    assert model.config.noise_sigma_m == (0.003, 0.01)
    assert np.std(values) == pytest.approx(0.003 + 0.01 * 1.3, rel=0.2)


@pytest.mark.parametrize("a, b", [(0.004, 0.02), (0.03, 0.0), (0.0, 0.03)])
def test_the_noise_grows_with_range_as_the_configured_a_plus_b_r(client, a, b):
    """Measured spread of readings of a wall at 1.0 m and at 3.0 m against sigma = a + b r from the numbers
    configured (not from the model's own sigma): 600 readings give the std within 12 % (over 4 standard errors)."""
    for distance in (1.0, 3.0):
        model = ir_model(seed=7, noise_sigma_m=[a, b])
        body, _ = wall(client, (distance + 0.2, 0.0, 0.0))  # the sensor's origin is 0.2 m out on the ring
        values = np.array([r.range_m[0] for r in measure_n(model, client, 600)])
        pb.removeBody(body, physicsClientId=client)
        assert values.std() == pytest.approx(a + b * distance, rel=0.12), (a, b, distance)


def test_cone_reports_the_nearest_echo_inside_it(client):
    """The sensors at +-30 degrees see the wall obliquely: their cone's nearest ray (15 degrees off their
    axis, towards the wall's normal) is shorter than the axis ray, and that is what they report."""
    model = ring_model(seed=3)
    point = (1.5, 0.0, 0.0)
    _, normal = wall(client, point)
    dist, inc = plane_rays(model, point, normal)
    rps = model.rays_per_sensor
    readings = measure_n(model, client, 200)
    for sensor in (1, 11):
        rays = slice(sensor * rps, (sensor + 1) * rps)
        _, expected = predict_sensor(model, dist[rays], inc[rays])
        assert expected < dist[sensor * rps] - 0.05  # well short of the axis ray's echo
        values = np.array([r.range_m[sensor] for r in readings])
        sigma = float(model.sigma_m(expected))
        assert abs(values.mean() - expected) <= 3 * sigma / math.sqrt(len(values)) + RAW_UNIT_M


def test_ring_pose_moves_and_turns_the_rays(client):
    """A ring at (1, 2, 0.3) turned 90 degrees: sensor 0 looks along world +y at a wall 1.5 m ahead."""
    model = ir_model(yaw_deg=[0, 90, 180, 270])
    position, orientation = (1.0, 2.0, 0.3), pb.getQuaternionFromEuler([0, 0, math.pi / 2])
    static_box(client, (20.0, 0.05, 20.0), (1.0, 3.55, 0.3))
    reading = model.measure(client, position, orientation)
    assert abs(reading.range_m[0] - 1.3) <= 5 * float(model.sigma_m(1.3))
    assert reading.cause[1:] == ("no_hit",) * 3


def test_object_hidden_behind_another_is_not_seen(client):
    """A target 2.3 m ahead is read when alone; with an occluder 1 m ahead, wider than the cone there, every
    reading is the occluder's."""
    model = ring_model(seed=5)
    static_box(client, (0.05, 0.6, 0.6), (2.55, 0.0, 0.0))
    alone = measure_n(model, client, 20)
    assert all(abs(r.range_m[0] - 2.3) <= 5 * float(model.sigma_m(2.3)) for r in alone)
    static_box(client, (0.05, 0.4, 0.4), (1.25, 0.0, 0.0))
    for reading in measure_n(model, client, 100):
        assert abs(reading.range_m[0] - 1.0) <= 5 * float(model.sigma_m(1.0)) + RAW_UNIT_M


def test_beyond_max_range_reads_no_target_and_counts_no_hit(client):
    model = ring_model()
    wall(client, (4.3, 0.0, 0.0))  # 4.1 m from sensor 0's origin, beyond 4.0
    for reading in measure_n(model, client, 10):
        assert reading.raw == (65535,) * 12 and reading.cause == ("no_hit",) * 12
        assert reading.range_m == (None,) * 12
    assert model.counters == {"no_hit": 120, "range": 0, "angle": 0, "noise": 0}


@pytest.mark.parametrize("make", [ir_model, ring_model], ids=["infrared", "ultrasonic"])
def test_closer_than_min_range_counts_range(client, make):
    model = make()
    wall(client, (0.22, 0.0, 0.0))  # 2 cm from sensor 0's face; min range 3 cm (cone edge: 2.07 cm)
    readings = measure_n(model, client, 10)
    code = 65534 if make is ring_model else 65535  # the catalog ring says why (invalid_raw); the IR ring cannot
    assert all(r.raw[0] == code and r.cause[0] == "range" for r in readings)
    assert model.counters["range"] >= 10


def test_invalid_sensor_takes_its_axis_rays_cause(client):
    """A small plate 0.8 m ahead, turned 80 degrees, is met by the axis ray only (the other 12 rays of the cone
    pass it by and hit nothing): when its echo drops out, the reading's cause is the axis ray's, ``angle``,
    although ``no_hit`` is the commonest cause among the rays."""
    model = ring_model(seed=9, yaw_deg=[0], registers=None)
    static_box(client, (0.005, 0.1, 0.05), (1.0, 0.0, 0.025), pb.getQuaternionFromEuler([0, 0, math.radians(80)]))
    readings = measure_n(model, client, 200)
    causes = collections.Counter(r.cause[0] for r in readings)
    p_drop = float(model.dropout_probability(80.0))
    assert set(causes) == {"angle", None}
    assert abs(causes["angle"] / 200 - p_drop) <= binomial_tolerance(p_drop, 200)
    assert model.counters == {"no_hit": 0, "range": 0, "angle": causes["angle"], "noise": 0}


# dropout
@pytest.mark.parametrize("tilt_deg", [35.0, 50.0, 55.0, 62.0, 70.0])
def test_infrared_dropout_follows_the_logistic(client, tilt_deg):
    """A single ray meets a wall 1 m away at incidence ``tilt_deg``; the fraction of invalid readings over N
    trials must match p = logistic((tilt - 55) / 8) (plus the noise rejection, negligible at 1 m) within
    |observed - p| <= 4 sqrt(p (1 - p) / N) + 0.01, and every invalid reading's cause is ``angle``."""
    model = ir_model(seed=int(tilt_deg))
    point = (1.2, 0.0, 0.0)
    _, normal = wall(client, point, tilt_deg)
    dist, inc = plane_rays(model, point, normal)
    assert inc[0] == pytest.approx(tilt_deg)
    p, _ = predict_sensor(model, dist, inc)
    assert p == pytest.approx(1.0 / (1.0 + math.exp(-(tilt_deg - 55.0) / 8.0)), abs=1e-6)
    n = 1500
    readings = measure_n(model, client, n)
    invalid = [r.cause[0] for r in readings if r.cause[0] is not None]
    assert set(invalid) <= {"angle"}
    assert abs(len(invalid) / n - p) <= binomial_tolerance(p, n)


@pytest.mark.parametrize("tilt_deg", [60.0, 72.0])
def test_ultrasonic_cone_dropout_matches_the_ray_product(client, tilt_deg):
    """The catalog ring in front of a wall tilted about the vertical: every sensor's invalid fraction over N
    trials matches the analytic prediction (each ray surviving independently, the nearest survivor reported,
    noise rejection by the normal tail) within 4 binomial standard deviations + 0.01."""
    model = ring_model(seed=int(tilt_deg) + 100)
    point = (1.2, 0.0, 0.0)
    _, normal = wall(client, point, tilt_deg)
    dist, inc = plane_rays(model, point, normal)
    rps, n = model.rays_per_sensor, 600
    readings = measure_n(model, client, n)
    interesting = 0
    for sensor in range(12):
        rays = slice(sensor * rps, (sensor + 1) * rps)
        p, _ = predict_sensor(model, dist[rays], inc[rays])
        observed = sum(r.cause[sensor] is not None for r in readings) / n
        assert abs(observed - p) <= binomial_tolerance(p, n), (sensor, observed, p)
        interesting += 0.05 < p < 0.95
    assert interesting >= 1  # the tilt puts at least one sensor in the transition


# counters
def test_counters_by_cause_add_up_to_the_invalid_readings(client):
    """A scene with every cause at once: a tilted wall (angle), a wall inside the blind zone (range), open
    space (no_hit) and a noisy sensor (noise). The counters equal the causes the readings report."""
    model = ir_model(seed=11, yaw_deg=[0, 90, 180, 270], noise_sigma_m=[0.2, 0.5])
    wall(client, (1.0, 0.0, 0.0), 55.0)  # sensor 0 (+x): 0.8 m at 55 degrees, half the echoes lost
    static_box(client, (20.0, 0.05, 20.0), (0.0, 0.22 + 0.05, 0.0))  # sensor 1 (+y): 2 cm, inside min range
    static_box(client, (0.05, 20.0, 20.0), (-0.45 - 0.05, 0.0, 0.0))  # sensor 2 (-x): 0.25 m, noise below 3 cm
    readings = measure_n(model, client, 300)
    seen = collections.Counter(c for r in readings for c in r.cause if c is not None)
    assert dict(seen) == {k: v for k, v in model.counters.items() if v}
    assert sum(model.counters.values()) == sum(r.n_invalid for r in readings)
    assert set(seen) == set(CAUSES)


# determinism
def build_scene(cid: int) -> None:
    wall(cid, (1.0, 0.0, 0.0), 58.0)
    static_box(cid, (0.1, 0.1, 0.5), (0.0, -1.5, 0.0))
    static_box(cid, (0.3, 0.3, 0.3), (-2.0, 0.5, 0.0))


def run_scene(seed: int, threads: int = 1) -> tuple[list[RingReading], dict[str, int]]:
    cid = pb.connect(pb.DIRECT)
    try:
        build_scene(cid)
        sensor = load_part("range_ring").sensors[0]
        model = RangeRingModel(sensor, seed, num_threads=threads)
        return measure_n(model, cid, 30), model.counters
    finally:
        pb.disconnect(cid)


def test_same_seed_same_scene_gives_identical_readings():
    first, second, threaded = run_scene(42), run_scene(42), run_scene(42, threads=0)
    assert first == second == threaded
    other = run_scene(43)
    assert other[0] != first[0]
    assert sum(r.n_invalid for r in first[0]) > 0  # the scene exercises the random dropout


# the sensor's own body
def catalog_ring_body(cid: int, position=ORIGIN, orientation=IDENTITY) -> int:
    shapes = load_part("range_ring").body("ring").collisions
    col = pb.createCollisionShapeArray(
        shapeTypes=[pb.GEOM_BOX] * len(shapes), halfExtents=[[v / 2 for v in s.size] for s in shapes],
        collisionFramePositions=[list(s.pose.xyz) for s in shapes],
        collisionFrameOrientations=[pb.getQuaternionFromEuler(s.pose.rpy) for s in shapes], physicsClientId=cid)
    return pb.createMultiBody(0, col, basePosition=list(position), baseOrientation=list(orientation),
                              physicsClientId=cid)


def test_rays_start_outside_the_ring_housings(client):
    """The catalog ring's own housings, alone in the world: no ray hits them (they start on the outer face
    and point outward)."""
    catalog_ring_body(client, (0.5, -0.2, 1.0), pb.getQuaternionFromEuler([0, 0, 0.3]))
    model = ring_model()
    reading = model.measure(client, (0.5, -0.2, 1.0), pb.getQuaternionFromEuler([0, 0, 0.3]))
    assert reading.cause == ("no_hit",) * 12


def test_ignored_bodies_are_seen_through(client):
    """Rays pass through ignored (body, link) pairs, thin or thick, and still stop at anything else."""
    model = ir_model(noise_sigma_m=[0.0, 0.0])
    plate = static_box(client, (0.01, 0.5, 0.5), (0.7, 0.0, 0.0))
    ball = pb.createMultiBody(0, pb.createCollisionShape(pb.GEOM_SPHERE, radius=0.3, physicsClientId=client),
                              basePosition=[1.4, 0.0, 0.0], physicsClientId=client)
    wall(client, (2.2, 0.0, 0.0))

    def reads(*ignore):
        return model.measure(client, ORIGIN, IDENTITY, ignore=list(ignore)).range_m[0]

    assert reads() == pytest.approx(0.49)
    assert reads((plate, -1)) == pytest.approx(0.9, abs=1e-3)  # Bullet ray-sphere tests are good to ~0.5 mm
    assert reads((plate, None), (ball, -1)) == pytest.approx(2.0)
    assert reads((plate, 3)) == pytest.approx(0.49)  # another link of that body: still seen


# contact sensors
def shape_args(shapes: tuple[Shape, ...]) -> dict:
    return {"shapeTypes": [pb.GEOM_BOX] * len(shapes), "halfExtents": [[v / 2 for v in s.size] for s in shapes],
            "collisionFramePositions": [list(s.pose.xyz) for s in shapes],
            "collisionFrameOrientations": [pb.getQuaternionFromEuler(s.pose.rpy) for s in shapes]}


def mount_body(cid: int, shapes: tuple[Shape, ...], position, orientation, as_link: bool) -> tuple[int, int]:
    """A static body carrying the part's collisions, either as a base with an offset, turned inertial frame
    or as link 0 under a small static base. Returns (body, link index)."""
    col = pb.createCollisionShapeArray(**shape_args(shapes), physicsClientId=cid)
    inertial = {"position": [0.02, 0.01, -0.01], "orientation": pb.getQuaternionFromEuler([0.2, 0.1, 0.4])}
    if not as_link:
        body = pb.createMultiBody(0, col, basePosition=list(position), baseOrientation=list(orientation),
                                  baseInertialFramePosition=inertial["position"],
                                  baseInertialFrameOrientation=inertial["orientation"], physicsClientId=cid)
        return body, -1
    base = pb.createCollisionShape(pb.GEOM_SPHERE, radius=0.01, physicsClientId=cid)
    body = pb.createMultiBody(
        0, base, basePosition=[position[0] - 0.3, position[1], position[2]], linkMasses=[0.4],
        linkCollisionShapeIndices=[col], linkVisualShapeIndices=[-1], linkPositions=[[0.3, 0, 0]],
        linkOrientations=[list(orientation)], linkInertialFramePositions=[inertial["position"]],
        linkInertialFrameOrientations=[inertial["orientation"]], linkParentIndices=[0],
        linkJointTypes=[pb.JOINT_FIXED], linkJointAxis=[[0, 0, 1]], physicsClientId=cid)
    return body, 0


@pytest.mark.parametrize("as_link", [False, True], ids=["base", "link"])
def test_link_frame_pose_is_the_frame_collisions_are_placed_in(client, as_link):
    """A small cube placed at (0.1, 0.05, 0) in the link frame, the link's inertial frame offset and turned:
    the cube's AABB centre is where link_frame_pose says (pybullet's own base pose would be off)."""
    cube = (Shape("box", (0.02, 0.02, 0.02), Pose(xyz=(0.1, 0.05, 0.0))),)
    position, orientation = (0.3, -0.2, 0.7), pb.getQuaternionFromEuler([0.3, -0.5, 1.1])
    body, link = mount_body(client, cube, position, orientation, as_link)
    frame_pos, frame_orn = link_frame_pose(client, body, link)
    np.testing.assert_allclose(frame_pos, position, atol=1e-9)
    lo, hi = pb.getAABB(body, link, physicsClientId=client)
    expected = np.asarray(position) + np.array(pb.getMatrixFromQuaternion(frame_orn)).reshape(3, 3) @ [0.1, 0.05, 0]
    np.testing.assert_allclose((np.asarray(lo) + np.asarray(hi)) / 2, expected, atol=1e-6)


def drop_box(cid: int, mass: float, position, half: float = 0.02) -> int:
    shape = pb.createCollisionShape(pb.GEOM_BOX, halfExtents=[half] * 3, physicsClientId=cid)
    return pb.createMultiBody(mass, shape, basePosition=list(position), physicsClientId=cid)


def settle(cid: int, steps: int = 240) -> None:
    for _ in range(steps):
        pb.stepSimulation(physicsClientId=cid)


# body x (the front) -> world z, body y (left) -> world -x: a wrong frame conversion swaps or loses zones
BUMPER_FACE_UP = pb.getQuaternionFromEuler([0, -math.pi / 2, math.pi / 2])
BUMPER_AT = (0.0, 0.0, 0.5)


def on_bumper_zone(y: float) -> tuple[float, float, float]:
    """Just above the front face (body x = 0.03) of the zone centred at body y, the face turned up."""
    rot = np.array(pb.getMatrixFromQuaternion(BUMPER_FACE_UP)).reshape(3, 3)
    return tuple(np.asarray(BUMPER_AT) + rot @ [0.03 + 0.0205, y, 0.0])


@pytest.mark.parametrize("as_link", [False, True], ids=["base", "link"])
def test_bumper_zone_pressed_sets_its_bit_and_light_touch_does_not(client, as_link):
    """A 1 kg box resting on the left zone (9.8 N > 5 N) sets bit 0; a 0.3 kg box on the centre zone
    (2.9 N < 5 N) sets nothing, although its contact is there; the forces add up to the weights."""
    part = load_part("bumper")
    model = ContactSensorModel(part.sensors[0])
    collisions = part.body("bumper").collisions
    body, link = mount_body(client, collisions, BUMPER_AT, BUMPER_FACE_UP, as_link)
    assert model.measure(client, body, link, collisions) == 0
    drop_box(client, 1.0, on_bumper_zone(0.135))
    drop_box(client, 0.3, on_bumper_zone(0.0))
    settle(client)
    forces = model.zone_forces(client, body, link, collisions)
    assert forces["left"] == pytest.approx(9.81, rel=0.05)
    assert forces["centre"] == pytest.approx(0.3 * 9.81, rel=0.05)
    assert forces["right"] == 0.0
    assert model.measure(client, body, link, collisions) == 0b001


def test_two_bumper_zones_pressed_set_both_bits(client):
    part = load_part("bumper")
    model = ContactSensorModel(part.sensors[0])
    collisions = part.body("bumper").collisions
    body, link = mount_body(client, collisions, BUMPER_AT, BUMPER_FACE_UP, as_link=False)
    drop_box(client, 1.0, on_bumper_zone(0.135))
    drop_box(client, 1.0, on_bumper_zone(-0.135))
    settle(client)
    assert model.measure(client, body, link, collisions) == 0b101
    frame = link_frame_pose(client, body, link)
    assert model.measure(client, body, link, collisions, link_frame=frame) == 0b101
    quarter_turn = pb.getQuaternionFromEuler([math.pi / 2, 0, 0])
    turned = (frame[0], pb.multiplyTransforms((0, 0, 0), frame[1], (0, 0, 0), quarter_turn)[1])
    assert model.measure(client, body, link, collisions, link_frame=turned) == 0b010  # the frame given is used


def test_torso_pads_only_feel_their_own_shape(client):
    """All of a body's shapes compete for a contact: a box on the torso's top beside the pads presses no pad;
    one on the left pad sets the left sensor's bit and not the right's."""
    part = load_part("torso")
    left, right = (ContactSensorModel(s) for s in part.sensors)
    collisions = part.body("torso").collisions
    body, link = mount_body(client, collisions, (0, 0, 0), IDENTITY, as_link=False)
    drop_box(client, 1.0, (0.0, 0.0, 0.62 + 0.0205))
    settle(client)
    assert (left.measure(client, body, link, collisions), right.measure(client, body, link, collisions)) == (0, 0)
    drop_box(client, 1.0, (0.0, 0.105, 0.63 + 0.0205))
    settle(client)
    assert (left.measure(client, body, link, collisions), right.measure(client, body, link, collisions)) == (1, 0)


def test_nearest_shape_rule():
    """Signed distances: inside is negative; the point goes to the nearest shape, containment winning."""
    shapes = load_part("torso").body("torso").collisions
    assert nearest_shape(shapes, np.array([0.0, 0.105, 0.63])) == 1  # on the left pad's top face
    assert nearest_shape(shapes, np.array([0.0, -0.105, 0.625])) == 2  # inside the right pad
    assert nearest_shape(shapes, np.array([0.1, 0.0, 0.3])) == 0  # the body's front face
    ball = Shape("sphere", (0.1,), Pose(xyz=(1.0, 0.0, 0.0)))
    cyl = Shape("cylinder", (0.1, 0.4), Pose(rpy=(math.pi / 2, 0.0, 0.0)))
    assert signed_distance(ball, np.array([1.0, 0.0, 0.3])) == pytest.approx(0.2)
    assert signed_distance(cyl, np.array([0.0, 0.3, 0.0])) == pytest.approx(0.1)  # axis turned onto y
    assert signed_distance(cyl, np.array([0.0, 0.0, 0.15])) == pytest.approx(0.05)
    np.testing.assert_allclose(rpy_matrix((0.0, 0.0, math.pi / 2)) @ [1, 0, 0], [0, 1, 0], atol=1e-12)


@pytest.mark.parametrize("params, param", [
    ({"threshold_n": 5.0, "zones": [{"name": "a", "bit": 0, "collision": 0}]}, "register"),
    ({"register": "contact", "threshold_n": "5", "zones": [{"name": "a", "bit": 0, "collision": 0}]}, "threshold_n"),
    ({"register": "contact", "threshold_n": 5.0, "zones": []}, "zones"),
    ({"register": "contact", "threshold_n": 5.0, "zones": [{"name": "a", "bit": 8, "collision": 0}]}, "zones[0].bit"),
    ({"register": "contact", "threshold_n": 5.0, "zones": [{"name": "a", "bit": 0}]}, "zones[0].collision"),
    ({"register": "contact", "threshold_n": 5.0,
      "zones": [{"name": "a", "bit": 0, "collision": 0}, {"name": "b", "bit": 0, "collision": 1}]}, "zones"),
])
def test_contact_params_are_validated_naming_sensor_and_param(params, param):
    with pytest.raises(ValueError, match=rf"'pad'.*'{__import__('re').escape(param)}'"):
        ContactSensorModel(Sensor("pad", "contact", "torso", params))


def test_zone_naming_a_missing_collision_is_refused(client):
    model = ContactSensorModel(load_part("torso").sensors[1])
    with pytest.raises(ValueError, match="shoulder_right.*collision 2"):
        model.measure(client, 0, -1, load_part("torso").body("torso").collisions[:2])

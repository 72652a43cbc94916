"""The range sensor ring as the real part measures (the sensor-simulation reference): rays cast into the pybullet world,
then the ways a real range finder fails: nothing within range, a target inside the blind zone, a steep surface that
sends the echo elsewhere, noise that grows with range.

Geometry. The ring frame is the ring body's frame (x forward, z up). Sensor ``i`` looks along
``yaw_deg[i]`` (0 = +x, 90 = +y) from the point at ``origin_radius_m`` in that direction and ``origin_z_m``
high, i.e. on the housing's outer face. An ``infrared`` sensor is one ray along that axis. An ``ultrasonic``
sensor is a cone of half angle ``cone_half_angle_deg`` sampled by :data:`CONE_PATTERN`: the axis ray first,
then for each (fraction, count) a ring of ``count`` rays at ``fraction`` of the cone's edge, spaced evenly
around the axis starting in the ring plane (roll 0 = towards +yaw, 90 = up), so with counts divisible by 4
the horizontal and vertical extremes of the cone are sampled. The optional ``cone_vertical_half_angle_deg``
(default: the same as ``cone_half_angle_deg``) makes the beam elliptical, as many transducers' beams are
(narrower vertically, so the floor echoes less): the ray at roll r aims at the point (h cos r, v sin r) of
the ellipse of half angles h (horizontal) and v (vertical), scaled by the ring's fraction; for h = v this is
the circular cone. The catalog ring (12 sensors, ultrasonic) casts 12 * 13 = 156 rays per measure.

Per ray, in this order (the first that applies is the ray's cause):
  ``no_hit``  nothing within ``max_range_m`` (the ray is ``max_range_m`` long);
  ``range``   the nearest hit is closer than ``min_range_m`` (the blind zone);
  ``angle``   dropout with probability logistic((incidence - dropout_angle50_deg) / dropout_width_deg), the
              incidence being the angle between the ray and the surface normal pybullet reports.
A ray that passes all three is a surviving echo. Occlusion is the ray test's own: only the nearest hit counts.
A ray whose nearest hit is an *occluder* (``measure``'s ``occluders``: bodies that hide but never echo) is ``no_hit``.

Surfaces. The dropout law above is the sensor's calibrated one, for the surface it was calibrated on. A world that
names surfaces (``measure``'s ``surfaces``: (body, link) -> name, firmware_sim/world) gives each ray the law of
the surface it hit (surface_law.py: the surface table's factors, or the law the sensor carries measured on that
surface), and an echo at an incidence below that surface's ``specular_below_deg`` is lost as saturated (cause
``angle``: it is the incidence that loses it). The noise of a reading is the law of the surface its echo came
from. Where nothing names a surface the arithmetic is the single law's, draw for draw.

Per sensor: the reading is the nearest surviving echo (the first echo to come back), with one Gaussian noise
draw, sigma = a + b * range (``noise_sigma_m`` = [a, b], range being the true distance of that echo); a noisy
value outside [min_range_m, max_range_m] is rejected with cause ``noise``. With no surviving echo the reading
is invalid and its cause is the cause of the sensor's axis ray. Noise is applied to the chosen echo, not to
every ray, so a flat wall reads its perpendicular distance without the bias a minimum of noisy values has.
An invalid reading is ``no_target_raw``, or, with ``invalid_raw: {range: R, angle: A, noise: N}``, the code of
its cause (``no_hit`` stays ``no_target_raw``), so that the host can tell per reading why it failed (the
counters say only how many); a valid one is round(range_m / 1 mm), clamped to [0, the lowest code - 1]. Each
invalid reading adds one to the model's counter of its cause.

The law (dropout, noise, the valid rule) is written once in ring_law.py: this model samples it, the calibration
fit computes its probabilities.

Randomness: one generator per part (``numpy.random.Generator(PCG64(seed))``). Each measure draws exactly one
uniform per ray and one normal per sensor whatever the scene, so a sensor's random stream never depends on
what the other sensors saw, and the same seed with the same scene gives identical readings.
"""
from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pybullet as pb

from hil.devices.descriptor.schema import Sensor

from .geometry import quat_matrix
from .params import ParamReader
from .ring_law import dropout_probability, noise_sigma
from .surface_law import SurfaceLaws, measured_laws

CAUSES: tuple[str, ...] = ("no_hit", "range", "angle", "noise")
VARIANTS: tuple[str, ...] = ("infrared", "ultrasonic")
RAW_UNIT_M = 0.001  # the range registers count millimetres
CONE_PATTERN: tuple[tuple[float, int], ...] = ((0.5, 4), (1.0, 8))  # (fraction of the cone edge, rays around)
MAX_HITS_PER_RAY = 32  # hits examined along a ray whose nearest hit is ignored

_VALID, _NO_HIT, _RANGE, _ANGLE, _NOISE = 0, 1, 2, 3, 4
_CAUSE_OF_CODE = {_NO_HIT: "no_hit", _RANGE: "range", _ANGLE: "angle", _NOISE: "noise"}


@dataclass(frozen=True)
class RingConfig:
    """A range ring's sensor model parameters, validated (see the module docstring for their meaning)."""

    name: str
    variant: str
    yaw_deg: tuple[float, ...]
    cone_half_angle_deg: float
    cone_vertical_half_angle_deg: float
    origin_radius_m: float
    origin_z_m: float
    min_range_m: float
    max_range_m: float
    no_target_raw: int
    dropout_angle50_deg: float
    dropout_width_deg: float
    noise_sigma_m: tuple[float, float]
    update_hz: float
    registers: tuple[str, ...] | None = None  # one range register per sensor, for the firmware
    invalid_counters: dict[str, str] | None = None  # cause -> counter register, for the firmware
    invalid_raw: dict[str, int] | None = None  # cause -> the register value of a reading invalid for it
    surfaces: dict[str, dict] | None = None  # surface -> the law measured on it (surface_law.py)

    def raw_of(self, cause: str) -> int:
        """The register value of a reading invalid for ``cause``."""
        return (self.invalid_raw or {}).get(cause, self.no_target_raw)

    @property
    def max_valid_raw(self) -> int:
        return min([self.no_target_raw, *(self.invalid_raw or {}).values()]) - 1

    @classmethod
    def from_sensor(cls, sensor: Sensor) -> RingConfig:
        """Validate a descriptor Sensor's params; a missing or ill-typed one raises ValueError naming it."""
        r = ParamReader(sensor.name, sensor.params)
        variant = r.string("variant", VARIANTS)
        yaw = r.number_list("yaw_deg")
        cone = _half_angle(r, "cone_half_angle_deg", None if variant == "ultrasonic" else 0.0)
        cone_vertical = _half_angle(r, "cone_vertical_half_angle_deg", cone)
        min_range = r.number("min_range_m", minimum=0.0)
        max_range = r.number("max_range_m", positive=True)
        if max_range <= min_range:
            raise r.error("max_range_m", f"must exceed min_range_m ({min_range}), not {max_range}")
        no_target = r.integer("no_target_raw", minimum=1)
        if no_target * RAW_UNIT_M <= max_range:
            raise r.error("no_target_raw", f"({no_target}) must lie beyond max_range_m in {RAW_UNIT_M} m units")
        return cls(
            name=sensor.name, variant=variant, yaw_deg=yaw, cone_half_angle_deg=cone,
            cone_vertical_half_angle_deg=cone_vertical,
            origin_radius_m=r.number("origin_radius_m", minimum=0.0), origin_z_m=r.number("origin_z_m"),
            min_range_m=min_range, max_range_m=max_range, no_target_raw=no_target,
            dropout_angle50_deg=r.number("dropout_angle50_deg"),
            dropout_width_deg=r.number("dropout_width_deg", positive=True),
            noise_sigma_m=r.number_list("noise_sigma_m", length=2, minimum=0.0),  # type: ignore[arg-type]
            update_hz=r.number("update_hz", positive=True),
            registers=r.string_list("registers", length=len(yaw)),
            invalid_counters=_counter_map(r),
            invalid_raw=_invalid_codes(r, no_target, max_range),
            surfaces=measured_laws(r) or None,
        )

    @property
    def n_sensors(self) -> int:
        return len(self.yaw_deg)

    @property
    def update_period_s(self) -> float:
        return 1.0 / self.update_hz


def _half_angle(r: ParamReader, name: str, default: float | None) -> float:
    value = r.number(name, minimum=0.0) if default is None else r.number(name, minimum=0.0, default=default)
    if value >= 90.0:
        raise r.error(name, f"must be below 90, not {value}")
    return value


def _counter_map(r: ParamReader) -> dict[str, str] | None:
    value = r.raw("invalid_counters", None)
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) != set(CAUSES) or \
            not all(isinstance(v, str) for v in value.values()):
        raise r.error("invalid_counters", f"must map each of {', '.join(CAUSES)} to a register name, not {value!r}")
    return dict(value)


def _invalid_codes(r: ParamReader, no_target: int, max_range: float) -> dict[str, int] | None:
    value = r.raw("invalid_raw", None)
    if value is None:
        return None
    causes = [c for c in CAUSES if c != "no_hit"]
    if not isinstance(value, dict) or not set(value) <= set(causes) or \
            not all(isinstance(v, int) and not isinstance(v, bool) for v in value.values()):
        raise r.error("invalid_raw", f"must map some of {', '.join(causes)} to integer codes, not {value!r}")
    codes = [no_target, *value.values()]
    if len(set(codes)) != len(codes) or any(c * RAW_UNIT_M <= max_range for c in codes):
        raise r.error("invalid_raw", f"codes {value} must differ from each other and from no_target_raw "
                                     f"({no_target}) and lie beyond max_range_m in {RAW_UNIT_M} m units")
    return dict(value)


@dataclass(frozen=True)
class RingReading:
    """One measure of the whole ring, in sensor order: the register value, the range in metres (None when
    invalid) and the cause of an invalid reading (None when valid)."""

    raw: tuple[int, ...]
    range_m: tuple[float | None, ...]
    cause: tuple[str | None, ...]

    @property
    def n_invalid(self) -> int:
        return sum(c is not None for c in self.cause)


def cone_directions(half_angle_deg: float, vertical_half_angle_deg: float | None = None,
                    pattern: Sequence[tuple[float, int]] = CONE_PATTERN) -> np.ndarray:
    """Unit ray directions of one cone in the sensor's own frame (x along the axis, y towards +yaw, z up):
    the axis first, then each ring of the pattern."""
    h = math.radians(half_angle_deg)
    v = h if vertical_half_angle_deg is None else math.radians(vertical_half_angle_deg)
    dirs = [(1.0, 0.0, 0.0)]
    for fraction, count in pattern:
        for k in range(count):
            r = 2.0 * math.pi * k / count
            across, up = fraction * h * math.cos(r), fraction * v * math.sin(r)  # the aim in angle space
            theta, roll = math.hypot(across, up), math.atan2(up, across)
            dirs.append((math.cos(theta), math.sin(theta) * math.cos(roll), math.sin(theta) * math.sin(roll)))
    return np.array(dirs)


class RangeRingModel:
    """A ring of range finders on one part, with its own seeded generator and invalid-reading counters."""

    def __init__(self, sensor: Sensor, seed: int, num_threads: int = 1):
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise ValueError(f"sensor {sensor.name!r}: seed must be a non-negative integer, not {seed!r}")
        self.config = RingConfig.from_sensor(sensor)
        self.num_threads = num_threads  # 1: pybullet's batch is tiny, threads cost more than they save
        self.rng = np.random.Generator(np.random.PCG64(seed))
        self._counters = {cause: 0 for cause in CAUSES}
        self.origins_local, self.directions_local = self._local_rays()
        cfg = self.config
        self.surface_laws = SurfaceLaws(cfg.name, cfg.dropout_angle50_deg, cfg.dropout_width_deg, cfg.noise_sigma_m,
                                        cfg.surfaces)

    # geometry
    @property
    def rays_per_sensor(self) -> int:
        return 1 if self.config.variant == "infrared" else 1 + sum(count for _, count in CONE_PATTERN)

    @property
    def n_rays(self) -> int:
        return self.config.n_sensors * self.rays_per_sensor

    def _local_rays(self) -> tuple[np.ndarray, np.ndarray]:
        """Ray origins and unit directions in the ring frame, sensor-major (the axis ray first)."""
        cfg = self.config
        cone = cone_directions(cfg.cone_half_angle_deg, cfg.cone_vertical_half_angle_deg)[: self.rays_per_sensor]
        origins, dirs = [], []
        for yaw in np.radians(cfg.yaw_deg):
            c, s = math.cos(yaw), math.sin(yaw)
            to_ring = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
            origin = np.array([cfg.origin_radius_m * c, cfg.origin_radius_m * s, cfg.origin_z_m])
            origins.append(np.repeat(origin[None, :], len(cone), axis=0))
            dirs.append(cone @ to_ring.T)
        return np.concatenate(origins), np.concatenate(dirs)

    def world_rays(self, position: Sequence[float], orientation: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
        """Ray origins and directions in the world for the ring frame at ``position``/``orientation``."""
        rot = quat_matrix(orientation)
        return self.origins_local @ rot.T + np.asarray(position, dtype=float), self.directions_local @ rot.T

    # the model
    def dropout_probability(self, incidence_deg: np.ndarray | float) -> np.ndarray:
        """Probability that an echo at this incidence angle (degrees) is lost: the logistic of the descriptor."""
        return dropout_probability(incidence_deg, self.config.dropout_angle50_deg, self.config.dropout_width_deg)

    def sigma_m(self, range_m: np.ndarray | float) -> np.ndarray:
        return noise_sigma(range_m, *self.config.noise_sigma_m)

    @property
    def counters(self) -> dict[str, int]:
        """Invalid readings since the model was made, by cause (a copy)."""
        return dict(self._counters)

    def save_state(self) -> dict[str, Any]:
        """The generator's state and the counters (a saved world: firmware_sim/embodied/state.py)."""
        return {"rng": self.rng.bit_generator.state, "counters": dict(self._counters)}

    def restore_state(self, state: Mapping[str, Any]) -> None:
        """Put back what :meth:`save_state` gave."""
        self.rng.bit_generator.state = state["rng"]
        self._counters.update(state["counters"])

    def reseed(self, seed: int) -> None:
        """Draw the noise from ``seed`` from now on (a world put back to its start for a new episode); the counters
        go on."""
        self.rng = np.random.Generator(np.random.PCG64(seed))

    def measure(self, client: int, ring_position: Sequence[float], ring_orientation_quat: Sequence[float],
                ignore: Collection[tuple[int, int | None]] = (), occluders: Collection[int] = (),
                surfaces: Mapping[tuple[int, int], str] | None = None) -> RingReading:
        """Measure every sensor once from the ring frame at the given world pose.

        ``ignore``: (body_id, link_index) pairs the rays pass through (the ring's own body, say); a link index
        of None ignores the whole body. ``occluders``: body ids that stop a ray but never echo (a mixed trial's
        map walls, firmware_sim/shadow.py): a ray whose nearest hit is one of them counts as ``no_hit``.
        ``surfaces``: (body id, link index; -1 for a body's base) -> surface name, the world's
        (``World.surfaces``); a hit on anything not in it is the default surface. Empty or None: the single law.
        Updates the counters and advances the generator (the same draws whatever ``occluders`` hides).
        """
        origins, dirs = self.world_rays(ring_position, ring_orientation_quat)
        dist, normals, bodies, links = cast_ray_links(client, origins, dirs, self.config.max_range_m, ignore,
                                                      self.num_threads)
        if occluders:
            dist = np.where(np.isin(bodies, np.fromiter(occluders, dtype=int)), np.inf, dist)
        uniform = self.rng.random(self.n_rays)
        normal_draws = self.rng.standard_normal(self.config.n_sensors)
        laws = None
        if surfaces or self.config.surfaces:
            surfaces = surfaces or {}
            laws = self.surface_laws.arrays([surfaces.get((b, k)) for b, k in zip(bodies.tolist(), links.tolist())])
        codes = self._ray_codes(dist, dirs, normals, uniform, laws)
        return self._combine(dist, codes, normal_draws, laws)

    def _ray_codes(self, dist: np.ndarray, dirs: np.ndarray, normals: np.ndarray, uniform: np.ndarray,
                   laws: tuple[np.ndarray, ...] | None = None) -> np.ndarray:
        """Each ray's fate: valid, no_hit, range or angle (noise is decided per sensor). ``laws``: per ray
        (angle50, width, noise a, noise b, specular limit) of the surface it hit; None: the single law."""
        cos_inc = np.clip(np.abs(np.einsum("ij,ij->i", dirs, normals)), 0.0, 1.0)
        incidence = np.degrees(np.arccos(cos_inc))
        if laws is None:
            dropped = uniform < self.dropout_probability(incidence)
        else:
            angle50, width, _, _, specular = laws
            dropped = (uniform < dropout_probability(incidence, angle50, width)) | (incidence < specular)
        codes = np.full(len(dist), _VALID)
        codes[dropped] = _ANGLE
        codes[dist < self.config.min_range_m] = _RANGE
        codes[~np.isfinite(dist)] = _NO_HIT
        return codes

    def _combine(self, dist: np.ndarray, codes: np.ndarray, normal_draws: np.ndarray,
                 laws: tuple[np.ndarray, ...] | None = None) -> RingReading:
        """Per sensor: the nearest surviving echo plus noise (the law of the surface it came from), or the axis
        ray's cause."""
        cfg = self.config
        shape = (cfg.n_sensors, self.rays_per_sensor)
        echoes = np.where(codes == _VALID, dist, np.inf).reshape(shape)
        nearest = echoes.min(axis=1)
        has_echo = np.isfinite(nearest)
        true_range = np.where(has_echo, nearest, 0.0)
        if laws is None:
            sigma = self.sigma_m(true_range)
        else:
            chosen = np.arange(cfg.n_sensors) * self.rays_per_sensor + echoes.argmin(axis=1)
            sigma = laws[2][chosen] + laws[3][chosen] * true_range
        noisy = true_range + sigma * normal_draws
        rejected = has_echo & ((noisy < cfg.min_range_m) | (noisy > cfg.max_range_m))
        sensor_codes = np.where(has_echo, np.where(rejected, _NOISE, _VALID), codes.reshape(shape)[:, 0])
        raws, ranges, causes = [], [], []
        top = cfg.max_valid_raw
        for code, value in zip(sensor_codes.tolist(), noisy.tolist()):
            if code == _VALID:
                raws.append(min(max(round(value / RAW_UNIT_M), 0), top))
                ranges.append(value)
                causes.append(None)
            else:
                cause = _CAUSE_OF_CODE[code]
                self._counters[cause] += 1
                raws.append(cfg.raw_of(cause))
                ranges.append(None)
                causes.append(cause)
        return RingReading(tuple(raws), tuple(ranges), tuple(causes))


def cast_rays(client: int, origins: np.ndarray, dirs: np.ndarray, length_m: float,
              ignore: Collection[tuple[int, int | None]] = (), num_threads: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """Nearest hit along each ray within ``length_m``: (distance, inf when none; unit surface normal); see
    :func:`cast_ray_hits`, which also says which body each ray hit."""
    dist, normals, _ = cast_ray_hits(client, origins, dirs, length_m, ignore, num_threads)
    return dist, normals


def cast_ray_hits(client: int, origins: np.ndarray, dirs: np.ndarray, length_m: float,
                  ignore: Collection[tuple[int, int | None]] = (),
                  num_threads: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Nearest hit along each ray within ``length_m``: (distance, inf when none; unit surface normal; the body
    id hit, -1 when none); see :func:`cast_ray_links`, which also gives the link hit."""
    dist, normals, bodies, _ = cast_ray_links(client, origins, dirs, length_m, ignore, num_threads)
    return dist, normals, bodies


def cast_ray_links(client: int, origins: np.ndarray, dirs: np.ndarray, length_m: float,
                   ignore: Collection[tuple[int, int | None]] = (),
                   num_threads: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Nearest hit along each ray within ``length_m``: (distance, inf when none; unit surface normal; the body
    id hit, -1 when none; the link index hit, -1 for a body's base or none).

    Hits on ignored (body, link) pairs (link None: the whole body) are passed through: a ray whose nearest
    hit is ignored is cast again for all its hits (``reportHitNumber`` 0, 1, ..., which pybullet returns in
    no particular order, up to MAX_HITS_PER_RAY) and keeps the nearest one not ignored. Re-casting from just
    beyond the ignored hit would not do: Bullet reports a hit at fraction 0 for a ray starting inside some
    shapes and none for others.
    """
    n = len(origins)
    ends = origins + dirs * length_m
    table = _ray_table(client, origins, ends, -1, num_threads)
    ignored = _ignored(table[:, 0], table[:, 1], ignore)
    redo = np.flatnonzero(ignored)
    table[ignored, 0] = -1
    for hit_number in range(MAX_HITS_PER_RAY):
        if len(redo) == 0:
            break
        hits = _ray_table(client, origins[redo], ends[redo], hit_number, num_threads)
        usable = (hits[:, 0] >= 0) & ~_ignored(hits[:, 0], hits[:, 1], ignore)
        nearer = usable & ((table[redo, 0] < 0) | (hits[:, 2] < table[redo, 2]))
        table[redo[nearer]] = hits[nearer]
        redo = redo[hits[:, 0] >= 0]  # rays with no hit number k have none beyond it either
    dist = np.where(table[:, 0] >= 0, table[:, 2] * length_m, np.inf)
    normals = np.where(table[:, 0:1] >= 0, table[:, 3:6], 0.0)
    return dist, normals.reshape(n, 3), table[:, 0].astype(int), table[:, 1].astype(int)


def _ray_table(client: int, starts: np.ndarray, ends: np.ndarray, hit_number: int, num_threads: int) -> np.ndarray:
    """rayTestBatch as an (n, 6) array: body, link, fraction, normal x, y, z."""
    hits = pb.rayTestBatch(starts.tolist(), ends.tolist(), numThreads=num_threads, reportHitNumber=hit_number,
                           physicsClientId=client)
    return np.array([(h[0], h[1], h[2], *h[4]) for h in hits], dtype=float).reshape(-1, 6)


def _ignored(bodies: np.ndarray, links: np.ndarray, ignore: Collection[tuple[int, int | None]]) -> np.ndarray:
    mask = np.zeros(len(bodies), dtype=bool)
    for body, link in ignore:
        mask |= (bodies == body) if link is None else ((bodies == body) & (links == link))
    return mask

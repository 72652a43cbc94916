"""Surfaces: a range sensor fails by what it looks at (devices/surfaces.py, firmware_sim/sensors/surface_law.py).

The expected fractions are computed here from the shipped table's numbers, read as plain YAML, by the formula
docs/WORLD.md gives (angle50 + offset, width * scale; an infrared ray at incidence i on a flat wall is valid with
probability (1 - logistic((i - angle50) / width)) * P(its noisy range stays within [min, max])), never by the
model's own functions. Binomial intervals are 95 % ones (1.96 standard deviations) of the expected fraction.
"""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import yaml

from hil.devices.config_path import builtin_root
from hil.devices.descriptor.schema import Sensor
from hil.devices.yaml_source import ConfigError, load_yaml_text
from hil.firmware_sim.sensors import RangeRingModel
from hil.firmware_sim.world import World
from hil.firmware_sim.world.maps import load_map, parse_map
from hil.firmware_sim.world.pedestrians import PedestrianIntent, Pedestrians

IR = {"variant": "infrared", "yaw_deg": [0], "origin_radius_m": 0.0, "origin_z_m": 0.5, "min_range_m": 0.05,
      "max_range_m": 4.0, "no_target_raw": 65535, "dropout_angle50_deg": 55.0, "dropout_width_deg": 8.0,
      "noise_sigma_m": [0.003, 0.01], "update_hz": 10.0}
N = 2000
IDENTITY = (0.0, 0.0, 0.0, 1.0)


def table_numbers() -> dict:
    return yaml.safe_load((builtin_root() / "surfaces" / "default.yaml").read_text())["surfaces"]


def tilted_wall_map(incidence_deg: float, surface: str | None, distance_m: float = 2.0) -> str:
    """A map of one wall through (distance, 0) whose normal makes ``incidence_deg`` with +x (the ray's way)."""
    normal = math.radians(incidence_deg)
    along = normal + math.pi / 2
    dx, dy = 2.0 * math.cos(along), 2.0 * math.sin(along)
    extra = f", surface: {surface}" if surface else ""
    return (f"name: tilted\nwalls:\n  - {{from: [{distance_m - dx:.12f}, {-dy:.12f}], "
            f"to: [{distance_m + dx:.12f}, {dy:.12f}], thickness: 0.1, height: 2.0{extra}}}\n")


def readings(map_text: str, params: dict = IR, n: int = N, seed: int = 7) -> list:
    with World() as world:
        world.add_map(parse_map(load_yaml_text(map_text, "tilted.yaml", "map"), "tilted.yaml"))
        model = RangeRingModel(Sensor("ring", "range_ring", "ring", dict(params)), seed)
        return [model.measure(world.client, (0.0, 0.0, 0.0), IDENTITY, surfaces=world.surfaces) for _ in range(n)]


def expected_valid(incidence_deg: float, surface: dict, range_m: float) -> float:
    angle50 = IR["dropout_angle50_deg"] + surface.get("angle50_offset_deg", 0.0)
    width = IR["dropout_width_deg"] * surface.get("width_scale", 1.0)
    if incidence_deg < surface.get("specular_below_deg", 0.0):
        return 0.0
    survive = 1.0 - 1.0 / (1.0 + math.exp(-(incidence_deg - angle50) / width))
    a, b = (c * surface.get("noise_scale", 1.0) for c in IR["noise_sigma_m"])
    sigma = a + b * range_m
    phi = lambda z: 0.5 * (1.0 + math.erf(z / math.sqrt(2.0)))  # noqa: E731
    accept = phi((IR["max_range_m"] - range_m) / sigma) - phi((IR["min_range_m"] - range_m) / sigma)
    return survive * accept


def test_glass_and_plaster_at_40_degrees_give_each_surface_its_valid_fraction():
    table = table_numbers()
    incidence = 40.0
    near_face_m = 2.0 - 0.05 / math.cos(math.radians(incidence))  # the ray meets the box's near face
    fractions = {}
    for surface in ("glass", "plaster"):
        got = readings(tilted_wall_map(incidence, surface))
        valid = [r.range_m[0] for r in got if r.cause[0] is None]
        fraction = len(valid) / N
        p = expected_valid(incidence, table[surface] or {}, near_face_m)
        half = 1.96 * math.sqrt(p * (1 - p) / N)
        assert abs(fraction - p) <= half, (surface, fraction, p, half)
        assert all(r.cause[0] in (None, "angle") for r in got), surface  # nothing else loses these readings
        assert abs(sum(valid) / len(valid) - near_face_m) < 0.003, surface  # they measure the wall
        fractions[surface] = fraction
    assert fractions["plaster"] - fractions["glass"] > 0.4, fractions  # the surfaces really differ here


def test_a_wall_that_names_no_surface_reads_as_the_default_surface_draw_for_draw():
    unnamed = readings(tilted_wall_map(50.0, None), n=300)
    named = readings(tilted_wall_map(50.0, "plaster"), n=300)  # the table's default, named
    assert [r.raw for r in unnamed] == [r.raw for r in named]
    assert len({r.raw for r in unnamed}) > 10  # noise and dropout both at work, not a constant


def test_glass_seen_head_on_saturates_and_metal_loses_what_plaster_keeps():
    table = table_numbers()
    assert table["glass"]["specular_below_deg"] > 0.0
    head_on = readings(tilted_wall_map(0.0, "glass"), n=200)
    assert all(r.cause[0] == "angle" for r in head_on)  # below the specular limit: saturated, every one
    plaster = readings(tilted_wall_map(0.0, "plaster"), n=200)
    assert sum(r.cause[0] is None for r in plaster) == 200


def test_a_person_in_fabric_is_measured_with_fabric_and_a_removed_one_forgets_it():
    table = table_numbers()
    with World() as world:
        people = Pedestrians(world)
        people.sync([PedestrianIntent(1, 1.5, 0.0, 0.0, 0.0, surface="fabric")])
        body = people.bodies[1]
        assert world.surfaces == {(body, -1): "fabric"}
        model = RangeRingModel(Sensor("ring", "range_ring", "ring", dict(IR, noise_sigma_m=[0.05, 0.0])), 3)
        got = [model.measure(world.client, (0.0, 0.0, 0.0), IDENTITY, surfaces=world.surfaces) for _ in range(400)]
        values = [r.range_m[0] for r in got if r.range_m[0] is not None]
        mean = sum(values) / len(values)
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / (len(values) - 1))
        want = 0.05 * table["fabric"]["noise_scale"]  # the noise of the surface the echo came from
        assert abs(sd - want) < 4 * want / math.sqrt(2 * len(values)), (sd, want)
        people.sync([])
        assert world.surfaces == {}


def test_an_unknown_surface_names_the_file_line_and_the_known_surfaces(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nwalls:\n  - {from: [0, 0], to: [1, 0]}\n  - {from: [0, 1], to: [1, 1], "
                    "surface: glas}\n")
    with pytest.raises(ConfigError) as err:
        load_map(path)
    message = str(err.value)
    assert f"{path}:4" in message and "'glas'" in message
    for known in ("glass", "metal", "plaster", "fabric", "skin", "plastic", "wood"):
        assert known in message


def test_a_users_table_adds_a_surface_and_a_bad_field_names_its_line(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "config" / "surfaces"
    folder.mkdir(parents=True)
    (folder / "mine.yaml").write_text("schema: 1\nsurfaces:\n  mirror: {angle50_offset_deg: -40, "
                                      "specular_below_deg: 30}\n")
    got = readings(tilted_wall_map(20.0, "mirror"), n=50)
    assert all(r.cause[0] == "angle" for r in got)  # 20 degrees is below the mirror's specular limit
    (folder / "mine.yaml").write_text("schema: 1\nsurfaces:\n  mirror:\n    width_scale: 0\n")
    with pytest.raises(ConfigError) as err:
        readings(tilted_wall_map(20.0, "mirror"), n=1)
    assert f"{Path('config/surfaces/mine.yaml')}:4" in str(err.value) and "width_scale" in str(err.value)


def two_body_part(plate_surface: str | None) -> dict:
    """A plate (the part's base body, a 0.4 m square facing +x at x = 0.6) and a post fixed on top of it."""
    box = {"box": [0.05, 0.4, 0.4], "xyz": [0.6, 0.0, 0.2]}
    plate = {"name": "plate", "mass": 1.0, "com": [0.6, 0, 0.2], "inertia": {"ixx": 0.01, "iyy": 0.01, "izz": 0.01},
             "collisions": [box], **({"surface": plate_surface} if plate_surface else {})}
    post = {"name": "post", "mass": 0.5, "com": [0, 0, 0], "inertia": {"ixx": 0.01, "iyy": 0.01, "izz": 0.01},
            "collisions": [{"box": [0.05, 0.05, 0.3]}]}
    return {"schema": 1, "name": "panel", "kind": "link", "bodies": [plate, post],
            "joints": [{"name": "fix", "type": "fixed", "parent": "plate", "child": "post", "xyz": [0.6, 0, 0.55]}],
            "ports": [{"name": "mount", "body": "plate", "parent": True}]}


def test_a_robot_body_made_of_metal_is_its_own_link_and_saturates_a_ray_head_on():
    from hil.devices.descriptor.codec import descriptor_sha256, encode_descriptor
    from hil.devices.descriptor.validate import descriptor_from_dict
    from hil.firmware_sim.cpc_part import build_cpc_part
    from hil.firmware_sim.world import build_robot

    results = {}
    for surface in (None, "metal"):
        desc = descriptor_from_dict(two_body_part(surface))
        data = encode_descriptor(desc)
        with World() as world:
            robot = build_robot(world, [build_cpc_part(desc, data, descriptor_sha256(data), 1, 1)])
            links = {link.index for link in robot.links}
            model = RangeRingModel(Sensor("ring", "range_ring", "ring", dict(IR, origin_z_m=0.2)), 5)
            got = [model.measure(world.client, (-0.5, 0.0, 0.0), IDENTITY, surfaces=world.surfaces)
                   for _ in range(100)]
            results[surface] = (links, dict(world.surfaces), robot.body_id, [r.cause[0] for r in got])
    (links, surfaces, _, causes) = results[None]
    # one merged link, the plain law: at 0 degrees it loses an echo with probability logistic(-55 / 8) = 0.001
    assert links == {-1} and surfaces == {} and causes.count(None) >= 97
    (links, surfaces, body, causes) = results["metal"]
    assert links == {-1, 0} and surfaces == {(body, -1): "metal"}  # the post is no longer merged into the plate
    assert causes == ["angle"] * 100  # head on, metal's specular limit saturates every echo


def test_a_descriptor_naming_no_surface_has_the_bytes_it_had(tmp_path):
    """The descriptor's bytes (and so its hash, the scan cache's key) stay as they were when no body names one."""
    from hil.devices.catalog import compiled_part, load_part
    from hil.devices.descriptor.codec import encode_descriptor

    data, _ = compiled_part("range_ring")
    assert b"surface" not in data and encode_descriptor(load_part("range_ring")) == data


def test_an_unknown_body_surface_in_a_part_file_names_file_line_and_the_known_surfaces(tmp_path):
    from hil.devices.catalog import load_source
    from hil.devices.descriptor.validate import DescriptorError

    doc = two_body_part("glas")
    path = tmp_path / "panel.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    line = next(k for k, text in enumerate(path.read_text().splitlines(), 1) if "surface: glas" in text)
    with pytest.raises(DescriptorError) as err:
        load_source(path)
    assert f"{path}:{line}" in str(err.value) and "'glas'" in str(err.value) and "plaster" in str(err.value)


def rates_with_surface(tmp_path, surface: str) -> Path:
    """The shipped weekday rates with adults in ``surface`` (the rest of the file as shipped)."""
    text = (builtin_root() / "crowd" / "weekday.yaml").read_text()
    marker = "  adult_man:   {radius: {mean: 0.24, sd: 0.02, min: 0.19, max: 0.30}, speed: {mean: 1.38, sd: 0.20, " \
             "min: 0.70, max: 2.00}}"
    assert marker in text
    path = tmp_path / "rates.yaml"
    path.write_text(text.replace(marker, marker[:-1] + f", surface: {surface}}}"))
    return path


def test_a_person_types_clothing_goes_from_the_rates_file_over_the_bridge_to_the_world(tmp_path):
    from hil.bridge.crowd_link import intents_payload, parse_people
    from hil.bridge.envelope import pack, unpack
    from hil.crowd.maps import load_crowd_map
    from hil.crowd.population import Generator, load_rates, parse_start
    from hil.crowd.serve import intents
    from hil.crowd.sim import CrowdSim

    sim = CrowdSim(load_crowd_map("arcade"), seed=3, dt=0.1)
    sim.hooks.append(Generator(sim, load_rates(rates_with_surface(tmp_path, "fabric")),
                               start_s=parse_start("mon 08:00")))
    while len({t for t in sim.agents.types}) < 2:
        sim.step()
    sent = intents(sim)
    people = parse_people(unpack(pack("intents", intents_payload(sim.time_s, sent, [], [])), ("intents",)).payload)
    by_type = {(p.type, p.surface) for p in people}
    assert ("adult_man", "fabric") in by_type and all(s == "" for t, s in by_type if t != "adult_man"), by_type
    with World() as world:
        pedestrians = Pedestrians(world)
        pedestrians.sync([PedestrianIntent(p.id, p.x, p.y, p.vx, p.vy, p.radius, p.height, p.surface or None)
                          for p in people])
        men = {pedestrians.bodies[p.id] for p in people if p.type == "adult_man"}
        assert world.surfaces == {(body, -1): "fabric" for body in men}
    # nobody in a named surface: the message has no surface column at all (the bytes it had before surfaces)
    assert "surface" not in intents_payload(0.0, [p._replace(surface="") for p in sent], [], [])["people"]


def test_an_unknown_clothing_surface_in_a_rates_file_names_file_line_and_the_known_surfaces(tmp_path):
    from hil.crowd.population import load_rates

    path = rates_with_surface(tmp_path, "tweed")
    line = next(k for k, text in enumerate(path.read_text().splitlines(), 1) if "surface: tweed" in text)
    with pytest.raises(ConfigError) as err:
        load_rates(path)
    assert f"{path}:{line}" in str(err.value) and "'tweed'" in str(err.value) and "fabric" in str(err.value)

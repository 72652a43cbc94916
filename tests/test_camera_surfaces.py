"""Per-pixel surfaces: the depth camera draws each pixel with the law of the surface it hit (a wall's map surface,
a person's clothing), as the ring draws each ray; a world where no surface differs gives the very same bytes.

Real parts: walls built in a pybullet DIRECT world, drawn by the camera's renderers (moderngl on Mesa's EGL, and
pybullet's TinyRenderer), the depth failure model of firmware_sim/sensors/camera.py; a trial with a served
crowd whose script dresses a person in fabric. Every expected number is worked out here from the geometry chosen
here and the laws' numbers (the shipped surface table read as a user reads it), never from the code's output.
"""
from __future__ import annotations

import dataclasses
import math
from pathlib import Path

import numpy as np
import pytest
import yaml

from hil.devices.catalog import load_source
from hil.devices.config_path import builtin_root
from hil.devices.descriptor import DescriptorError
from hil.devices.descriptor.camera import DepthFailure, SurfaceDepth
from hil.devices.map_format import Wall
from hil.firmware_sim.embodied.camera import make_renderer
from hil.firmware_sim.render.gl import projection_matrix, view_matrix
from hil.firmware_sim.render.scene import (PERSON_BASE, InstanceList, SurfacePalette, base_legend, people_scene,
                                           static_scene)
from hil.firmware_sim.sensors.camera import DepthModel
from hil.firmware_sim.world import World
from hil.firmware_sim.world.maps import Map
from hil.firmware_sim.world.pedestrians import PedestrianIntent, Pedestrians

ROOT = Path(__file__).resolve().parents[1]
CATALOG_CAMERA = ROOT / "devices" / "catalog" / "parts" / "camera.yaml"
TABLE = yaml.safe_load((builtin_root() / "surfaces" / "default.yaml").read_text())["surfaces"]

W, H, FOV_DEG = 160, 120, 30.0
FX = (W / 2) / math.tan(math.radians(FOV_DEG / 2))
CX, CY = (W - 1) / 2, (H - 1) / 2
NEAR, FAR = 0.05, 12.0
EYE = np.array([0.0, 0.0, 0.5])
PITCH_DEG = 55.0  # the optical axis meets the wall at 55 degrees, tilted up: mirrored columns, equal incidence
FACE_X = 1.5  # the walls' face towards the camera
# the camera's calibrated law: plaster keeps it, glass is 20 degrees sooner and half as wide (the table)
FAILURE = DepthFailure(min_range_m=0.2, max_range_m=8.0, noise_z2=0.0015, dropout_angle50_deg=70.0,
                       dropout_width_deg=8.0, baseline_m=0.0)
Z95 = 1.959964


def _rotation(pitch_deg: float) -> np.ndarray:
    """Body x (the optical axis) pitched up by ``pitch_deg`` about the map's y axis."""
    a = math.radians(pitch_deg)
    return np.array([[math.cos(a), 0.0, -math.sin(a)], [0.0, 1.0, 0.0], [math.sin(a), 0.0, math.cos(a)]])


def _walls(left: str | None, right: str | None) -> tuple[Wall, ...]:
    """Two walls in one plane (face at x = 1.5 m), 6 m tall, meeting at y = 0: ``left`` (y > 0, the image's left
    half) and ``right``."""
    return (Wall((FACE_X + 0.05, 0.0), (FACE_X + 0.05, 3.0), 0.1, 6.0, surface=left),
            Wall((FACE_X + 0.05, -3.0), (FACE_X + 0.05, 0.0), 0.1, 6.0, surface=right))


def _render(renderer_kind: str, walls, monkeypatch, eye=EYE, pitch_deg=PITCH_DEG, people=(), walkers=()):
    """(z, cos, surface index, palette names, labels) of the walls (and people) seen by the test camera."""
    monkeypatch.setenv("HIL_CAMERA_RENDERER", renderer_kind)
    world = World()
    try:
        world.add_map(Map("pair", "<test>", tuple(walls)))
        bodies = {}
        if walkers:
            pedestrians = Pedestrians(world)
            pedestrians.sync(list(walkers))
            bodies = pedestrians.bodies
        renderer = make_renderer(W, H)
        assert renderer.name == {"gl": "moderngl-egl", "tiny": "pybullet-tinyrenderer"}[renderer_kind]
        view = view_matrix(np.asarray(eye, float), _rotation(pitch_deg), np.array([1.0, 0, 0]), np.array([0, 0, 1.0]))
        projection = projection_matrix(W, H, FX, FX, CX, CY, NEAR, FAR)
        palette = SurfacePalette()
        if renderer_kind == "tiny":
            _, labels, z, cos, index, _ = renderer.render_world(world.client, view, projection, NEAR, FAR, FX, FX, CX,
                                                                CY, world, None, bodies, palette)
        else:
            legend = base_legend()
            scene = InstanceList()
            scene.extend(static_scene(world.walls.values(), palette))
            scene.extend(people_scene(list(people), {}, 0, legend, palette))
            with renderer.ctx:
                _, labels, z, cos, index = renderer.render_surfaces(view, projection, scene.pack())
        return z, cos, index, tuple(palette.names), labels
    finally:
        world.close()


def _geometry(eye=EYE, pitch_deg=PITCH_DEG):
    """Per pixel, worked out by hand: the incidence on the wall plane (deg), z along the optical axis, and where
    the ray meets the plane (y, z in the map)."""
    v, u = np.mgrid[0:H, 0:W].astype(float)
    rays = np.stack([np.ones_like(u), -(u - CX) / FX, -(v - CY) / FX], axis=-1) @ _rotation(pitch_deg).T
    t = (FACE_X - eye[0]) / rays[..., 0]  # the body-frame ray has 1 along the optical axis: t is z
    incidence = np.degrees(np.arccos(rays[..., 0] / np.linalg.norm(rays, axis=-1)))
    return incidence, t, eye[1] + t * rays[..., 1], eye[2] + t * rays[..., 2]


def _law(surface: str | None, measured: dict | None = None) -> tuple[float, float, float, float]:
    """(angle50, width, noise_z2, specular limit) of ``surface`` from the table's numbers on FAILURE's."""
    factors = TABLE[surface or "plaster"] or {}
    measured = measured or {}
    return (measured.get("dropout_angle50_deg", FAILURE.dropout_angle50_deg + factors.get("angle50_offset_deg", 0.0)),
            measured.get("dropout_width_deg", FAILURE.dropout_width_deg * factors.get("width_scale", 1.0)),
            FAILURE.noise_z2 * factors.get("noise_scale", 1.0), factors.get("specular_below_deg", 0.0))


def _p_valid(incidence: np.ndarray, law: tuple[float, float, float, float]) -> np.ndarray:
    angle50, width, _, specular = law
    p = 1.0 - 1.0 / (1.0 + np.exp(-(incidence - angle50) / width))
    return np.where(incidence < specular, 0.0, p)


def _within_95(valid: np.ndarray, p: np.ndarray) -> tuple[bool, str]:
    """Whether the count of valid pixels lies in the 95 % interval of independent Bernoulli(p) pixels."""
    mean, sd = p.sum(), math.sqrt(float((p * (1 - p)).sum()))
    count = int(valid.sum())
    return abs(count - mean) <= Z95 * sd + 0.5, f"{count} valid of {len(p)}, expected {mean:.1f} +- {Z95 * sd:.1f}"


@pytest.mark.parametrize("renderer_kind", ["gl", "tiny"])
def test_glass_and_plaster_side_by_side_each_fail_by_their_own_law(renderer_kind, monkeypatch):
    """Glass left, plaster right, in one plane at mirrored incidences (43..67 degrees): each half's valid pixels
    are within the 95 % interval of its own law (glass: angle50 70 - 20, width 8 x 0.5), and the halves differ."""
    z, cos, index, names, _ = _render(renderer_kind, _walls("glass", None), monkeypatch)
    incidence, t, hit_y, hit_z = _geometry()
    inside = (t > FAILURE.min_range_m + 0.05) & (t < FAILURE.max_range_m - 0.1) & (hit_z > 0.05) & (hit_z < 5.9)
    depth, counts = DepthModel(FAILURE, FX, seed=12).apply(z, cos, 0, None, index, names)
    fractions = {}
    for surface, half in (("glass", inside & (hit_y > 0.02)), (None, inside & (hit_y < -0.02))):
        assert half.sum() > 4000, half.sum()
        assert {names[i] for i in np.unique(index[half])} == {surface}  # the renderer says what each pixel hit
        valid = ~np.isnan(depth[half])
        ok, why = _within_95(valid, _p_valid(incidence[half], _law(surface)))
        assert ok, f"{renderer_kind} {surface or 'plaster'}: {why}"
        fractions[surface] = valid.mean()
    assert fractions[None] - fractions["glass"] > 0.3, fractions
    assert counts["no_return"] == counts["range"] == counts["shadow"] == 0 and counts["angle"] > 0


def test_a_law_measured_on_glass_replaces_the_tables_factors_there_only(monkeypatch):
    """A camera carrying glass's law measured (angle50 58, width 5): glass pixels follow it, plaster ones keep
    the calibrated law; the table's saturation limit (10 deg) is still glass's, far below these incidences."""
    measured = {"dropout_angle50_deg": 58.0, "dropout_width_deg": 5.0}
    failure = dataclasses.replace(FAILURE, surfaces=(SurfaceDepth("glass", **measured),))
    z, cos, index, names, _ = _render("gl", _walls("glass", None), monkeypatch)
    incidence, t, hit_y, hit_z = _geometry()
    inside = (t > 0.25) & (t < 7.9) & (hit_z > 0.05) & (hit_z < 5.9)
    depth, _ = DepthModel(failure, FX, seed=12).apply(z, cos, 3, None, index, names)
    for surface, half, given in (("glass", inside & (hit_y > 0.02), measured), (None, inside & (hit_y < -0.02), None)):
        ok, why = _within_95(~np.isnan(depth[half]), _p_valid(incidence[half], _law(surface, given)))
        assert ok, f"{surface or 'plaster'}: {why}"


def test_a_saturating_surface_loses_what_it_sees_head_on(monkeypatch):
    """Glass seen head on (incidence under 10 degrees over the whole picture) saturates: every pixel is lost to
    cause 'angle', though the dropout law alone would keep nearly all of them; plaster beside it keeps them."""
    z, cos, index, names, _ = _render("gl", _walls("glass", None), monkeypatch, eye=(0.0, 0.0, 2.0), pitch_deg=0.0)
    incidence, t, hit_y, _ = _geometry(eye=(0.0, 0.0, 2.0), pitch_deg=0.0)
    glass, plaster = (incidence < 9.0) & (hit_y > 0.02), (incidence < 9.0) & (hit_y < -0.02)
    depth, counts = DepthModel(FAILURE, FX, seed=13).apply(z, cos, 0, None, index, names)
    assert glass.sum() > 3000 and np.isnan(depth[glass]).all()
    assert (~np.isnan(depth[plaster])).mean() > 0.99
    assert counts["angle"] >= glass.sum()


def test_bytes_change_only_where_a_surface_differs(monkeypatch):
    """The same walls with no surface named, and with the left one glass and the right one plaster named: the
    same seed gives the same depth bytes on every pixel but the glass ones; an image whose index is all the
    default surface gives the bytes of one rendered without an index; the same seed twice the same bytes."""
    z0, cos0, index0, names0, _ = _render("gl", _walls(None, None), monkeypatch)
    z1, cos1, index1, names1, _ = _render("gl", _walls("glass", "plaster"), monkeypatch)
    assert names0 == (None,) and not index0.any()
    assert z0.tobytes() == z1.tobytes() and cos0.tobytes() == cos1.tobytes()  # the same picture, other surfaces
    model = DepthModel(FAILURE, FX, seed=5)
    plain, plain_counts = model.apply(z0, cos0, 7)
    assert plain.tobytes() == model.apply(z0, cos0, 7, None, index0, names0)[0].tobytes()
    named, _ = model.apply(z1, cos1, 7, None, index1, names1)
    again, _ = DepthModel(FAILURE, FX, seed=5).apply(z1, cos1, 7, None, index1, names1)
    assert named.tobytes() == again.tobytes()
    _, _, hit_y, _ = _geometry()
    glass = hit_y > 0.02
    same = (plain.view(np.uint32) == named.view(np.uint32))
    assert same[hit_y < -0.02].all()  # plaster named is the calibrated law: draw for draw the same
    assert not same[glass].all() and np.isnan(named[glass]).sum() > np.isnan(plain[glass]).sum()
    other, _ = DepthModel(FAILURE, FX, seed=6).apply(z1, cos1, 7, None, index1, names1)
    assert other.tobytes() != named.tobytes()


@pytest.mark.parametrize("renderer_kind", ["gl", "tiny"])
def test_a_person_in_fabric_fails_by_fabrics_law_and_one_in_nothing_by_the_default(renderer_kind, monkeypatch):
    """A person 2 m ahead of a level camera, dressed in fabric (angle50 -10, width x 1.5, noise x 1.5) and in
    nothing named (the default surface): their pixels' valid counts each within the 95 % interval of their
    law at the incidences the renderer drew, and fabric's noise 1.5 times the default's."""
    law_camera = DepthFailure(min_range_m=0.2, max_range_m=8.0, noise_z2=0.004, dropout_angle50_deg=45.0,
                              dropout_width_deg=8.0, baseline_m=0.0)
    got = {}
    for surface in ("fabric", None):
        person = {"id": 1, "x": 2.0, "y": 0.0, "vx": 0.0, "vy": 0.0, "height": 1.7, "radius": 0.25,
                  "surface": surface}
        walker = PedestrianIntent(1, 2.0, 0.0, 0.0, 0.0, surface=surface)
        z, cos, index, names, labels = _render(renderer_kind, (), monkeypatch, eye=(0.0, 0.0, 1.0), pitch_deg=0.0,
                                               people=[person], walkers=[walker])
        on_person = np.isfinite(z) & (z < 3.0) & (labels == PERSON_BASE + 1)
        assert on_person.sum() > 1500, on_person.sum()
        assert {names[i] for i in np.unique(index[on_person])} == {surface}
        depth, _ = DepthModel(law_camera, FX, seed=22).apply(z, cos, 0, None, index, names)
        factors = TABLE[surface or "plaster"] or {}
        law = (45.0 + factors.get("angle50_offset_deg", 0.0), 8.0 * factors.get("width_scale", 1.0), 0.0, 0.0)
        incidence = np.degrees(np.arccos(np.clip(cos[on_person], 0.0, 1.0)))
        valid = ~np.isnan(depth[on_person])
        ok, why = _within_95(valid, _p_valid(incidence, law))
        assert ok, f"{renderer_kind} {surface}: {why}"
        residual = (depth[on_person] - z[on_person])[valid] / z[on_person][valid] ** 2
        got[surface] = (valid.mean(), float(np.std(residual)))
    assert got["fabric"][0] < got[None][0] - 0.05, got
    noise_scale = TABLE["fabric"]["noise_scale"]
    assert got[None][1] == pytest.approx(0.004, rel=0.1) and got["fabric"][1] == pytest.approx(0.004 * noise_scale,
                                                                                             rel=0.1), got


# --- bad input --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("addition, key, words", [
    ("        surfaces: {glas: {dropout_angle50_deg: 50}}\n", "depth.surfaces.glas", ["unknown surface 'glas'",
                                                                                     "glass", "plaster"]),
    ("        surfaces: {glass: {dropout_width_deg: 0}}\n", "depth.surfaces.glass.dropout_width_deg", ["> 0"]),
    ("        surfaces: {glass: {noise_sigma_m: [0.01, 0.02]}}\n", "depth.surfaces.glass.noise_sigma_m",
     ["unknown key", "noise_z2"]),
    ("        surfaces: [glass]\n", "depth.surfaces", ["must map surface names"]),
])
def test_a_bad_depth_surface_is_refused_at_file_line(tmp_path, addition, key, words):
    text = CATALOG_CAMERA.read_text()
    anchor = "        shadow_side: right"
    assert anchor in text
    lines = text.splitlines(keepends=True)
    at = next(i for i, row in enumerate(lines) if row.startswith(anchor))
    lines.insert(at + 1, addition)
    bad = tmp_path / "camera.yaml"
    bad.write_text("".join(lines))
    with pytest.raises(DescriptorError) as caught:
        load_source(bad)
    message = str(caught.value)
    assert message.startswith(f"{bad}:{at + 2}: ") and f"params.{key}" in message, message
    assert all(w in message for w in words), message
    assert "\n" not in message


def test_a_surface_index_beyond_the_names_is_refused():
    z = np.full((4, 4), 2.0, np.float32)
    cos = np.ones((4, 4), np.float32)
    index = np.zeros((4, 4), np.uint8)
    index[0, 0] = 2
    with pytest.raises(ValueError, match=r"surface index 2 beyond the 2 surfaces named \(None, glass\)"):
        DepthModel(FAILURE, FX, 0).apply(z, cos, 0, None, index, (None, "glass"))
    with pytest.raises(ValueError, match="unknown surface 'velvet'; known: "):
        DepthModel(FAILURE, FX, 0).apply(z, cos, 0, None, index, (None, "glass", "velvet"))
    with pytest.raises(ValueError, match="of the image's shape"):
        DepthModel(FAILURE, FX, 0).apply(z, cos, 0, None, index[:2], (None, "glass", "velvet"))

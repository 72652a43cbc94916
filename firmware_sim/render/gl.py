"""The camera renderer: moderngl on a headless EGL context (Mesa's llvmpipe where there is no GPU), drawing a
:mod:`scene` as three instanced draw calls (unit box, cylinder, sphere) into one framebuffer with four targets:
the colour (lit RGB), the label (int32 per pixel), the geometry (the point's z along the optical axis in metres,
float32, and the cosine of the incidence angle between the viewing ray and the surface normal, which the depth
failure model needs) and the surface (one byte per pixel: the index of what the pixel's primitive is made of in
the camera's scene.SurfacePalette, so the depth model draws each pixel with its surface's law). Depth is
therefore exact in float32, not read back from a z-buffer.

Projection is the pinhole model with OpenCV's pixel convention (camera.py): pixel (u, v) has its centre at
``u = cx + fx X / Z``, ``v = cy + fy Y / Z`` (Y down), and row 0 of every image is the top of the picture.

Why our own renderer rather than pybullet's getCameraImage: the people are figures that exist only for eyes
(the physics has capsules), every robot *part* gets its own label even where pybullet merges fixed links into
one link, and it is faster (bench/camera.py). pybullet's TinyRenderer stays the fallback (tiny.py) where no EGL
can be opened.
"""
from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from .scene import KINDS, Instances

VERTEX = """
#version 330
in vec3 in_position;
in vec3 in_normal;
in vec4 in_m0; in vec4 in_m1; in vec4 in_m2; in vec4 in_m3;
in vec4 in_colour;
in int in_label;
in int in_surface;
uniform mat4 view;
uniform mat4 projection;
out vec3 v_position;
out vec3 v_normal;
out vec3 v_world_normal;
out vec4 v_colour;
flat out int v_label;
flat out int v_surface;
void main() {
    mat4 model = mat4(in_m0, in_m1, in_m2, in_m3);
    vec4 world = model * vec4(in_position, 1.0);
    vec4 eye = view * world;
    mat3 normal_matrix = transpose(inverse(mat3(model)));
    v_world_normal = normalize(normal_matrix * in_normal);
    v_normal = mat3(view) * v_world_normal;
    v_position = eye.xyz;
    v_colour = in_colour;
    v_label = in_label;
    v_surface = in_surface;
    gl_Position = projection * eye;
}
"""

FRAGMENT = """
#version 330
in vec3 v_position;
in vec3 v_normal;
in vec3 v_world_normal;
in vec4 v_colour;
flat in int v_label;
flat in int v_surface;
layout(location = 0) out vec4 out_colour;
layout(location = 1) out int out_label;
layout(location = 2) out vec2 out_geometry;
layout(location = 3) out uint out_surface;
const vec3 SUN = normalize(vec3(0.35, 0.25, 0.9));
void main() {
    vec3 n = normalize(v_normal);
    vec3 ray = normalize(v_position);
    float lambert = abs(dot(normalize(v_world_normal), SUN));
    out_colour = vec4(v_colour.rgb * (0.45 + 0.55 * lambert), 1.0);
    out_label = v_label;
    out_geometry = vec2(-v_position.z, abs(dot(n, ray)));
    out_surface = uint(v_surface);
}
"""

SPHERE_RINGS, SPHERE_SEGMENTS, CYLINDER_SEGMENTS = 10, 16, 16
SKY = (0.70, 0.80, 0.92)


class RendererUnavailable(RuntimeError):
    """No renderer could be made (no EGL, no OpenGL 3.3): says why, so a camera's error can name it."""


def open_context():
    """A standalone OpenGL 3.3+ context on EGL (headless: no display, no GPU needed with Mesa)."""
    try:
        import moderngl
    except ImportError as exc:
        raise RendererUnavailable(f"moderngl is not installed ({exc}); pip install 'hil[camera]'") from None
    try:
        return moderngl.create_standalone_context(require=330, backend="egl")
    except Exception as exc:  # glcontext raises plain Exceptions for a missing libEGL or driver
        raise RendererUnavailable(f"no EGL OpenGL 3.3 context ({exc}); install Mesa's EGL (Debian: libegl1 "
                                  "libgl1-mesa-dri) or use the pybullet TinyRenderer fallback") from None


class GLRenderer:
    """Renders :class:`Instances` for one image size; reuse it for every frame of a camera."""

    name = "moderngl-egl"

    def __init__(self, width: int, height: int, ctx=None):
        import moderngl

        self.ctx = ctx if ctx is not None else open_context()
        self.width, self.height = width, height
        ctx = self.ctx
        self.program = ctx.program(vertex_shader=VERTEX, fragment_shader=FRAGMENT)
        self.colour = ctx.renderbuffer((width, height), 4, dtype="f1")
        self.label = ctx.renderbuffer((width, height), 1, dtype="i4")
        self.geometry = ctx.renderbuffer((width, height), 2, dtype="f4")
        self.surface = ctx.renderbuffer((width, height), 1, dtype="u1")
        self.depth = ctx.depth_renderbuffer((width, height))
        self.fbo = ctx.framebuffer(color_attachments=[self.colour, self.label, self.geometry, self.surface],
                                   depth_attachment=self.depth)
        self.meshes = {kind: ctx.buffer(_unit_mesh(kind).astype("f4").tobytes()) for kind in KINDS}
        self.counts = {kind: len(_unit_mesh(kind)) for kind in KINDS}
        self._instances: dict[str, tuple] = {}
        self._moderngl = moderngl

    def render(self, view: np.ndarray, projection: np.ndarray,
               scene: Mapping[str, Instances]) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """(rgb HxWx3 uint8, labels HxW int32, z HxW float32 m (inf where nothing), cos incidence HxW float32)."""
        return self.render_surfaces(view, projection, scene)[:4]

    def render_surfaces(self, view: np.ndarray, projection: np.ndarray, scene: Mapping[str, Instances]
                        ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """:meth:`render`'s images and the surface index HxW uint8 (the primitives' ``surfaces``; 0 where
        nothing was hit)."""
        self._draw(view, projection, scene)
        w, h = self.width, self.height
        rgb = np.frombuffer(self.fbo.read(components=3, attachment=0), np.uint8).reshape(h, w, 3)
        labels = np.frombuffer(self.fbo.read(components=1, attachment=1, dtype="i4"), np.int32).reshape(h, w)
        surfaces = np.frombuffer(self.fbo.read(components=1, attachment=3, dtype="u1"), np.uint8).reshape(h, w)
        z, cos = self._geometry()
        sky = ~np.isfinite(z)
        rgb, labels, surfaces = rgb.copy(), labels.copy(), surfaces.copy()
        if sky.any():
            rgb[sky] = np.round(np.array(SKY) * 255).astype(np.uint8)
            labels[sky] = 0
            surfaces[sky] = 0
            cos[sky] = 1.0
        return rgb, labels, z, cos, surfaces

    def render_depth(self, view: np.ndarray, projection: np.ndarray, scene: Mapping[str, Instances]) -> np.ndarray:
        """z alone (HxW float32 m along the view's axis, inf where nothing): a second view of the same scene, such
        as a depth camera's projector (sensors/projector.py), without reading colours and labels back."""
        self._draw(view, projection, scene)
        w, h = self.width, self.height
        z = np.frombuffer(self.fbo.read(components=1, attachment=2, dtype="f4"), np.float32).reshape(h, w).copy()
        z[z <= 0.0] = np.inf  # nothing drawn (see _geometry)
        return z

    def _geometry(self) -> tuple[np.ndarray, np.ndarray]:
        w, h = self.width, self.height
        geometry = np.frombuffer(self.fbo.read(components=2, attachment=2, dtype="f4"), np.float32).reshape(h, w, 2)
        # nothing drawn where the geometry target kept its clear value (z = 0: no surface lies on the camera's
        # centre, the near plane is in front of it); what an integer target holds there is not ours to trust
        z, cos = geometry[..., 0].copy(), geometry[..., 1].copy()
        z[z <= 0.0] = np.inf
        return z, cos

    def _draw(self, view: np.ndarray, projection: np.ndarray, scene: Mapping[str, Instances]) -> None:
        ctx = self.ctx
        self.fbo.use()
        ctx.enable(self._moderngl.DEPTH_TEST)
        ctx.disable(self._moderngl.CULL_FACE)
        self.fbo.clear(0.0, 0.0, 0.0, 0.0, depth=1.0)
        self.program["view"].write(view.T.astype("f4").tobytes())
        self.program["projection"].write(projection.T.astype("f4").tobytes())
        for kind in KINDS:
            inst = scene.get(kind)
            if inst is None or not len(inst.labels):
                continue
            self._vao(kind, inst).render(self._moderngl.TRIANGLES, vertices=self.counts[kind],
                                         instances=len(inst.labels))

    def _vao(self, kind: str, inst: Instances):
        n = len(inst.labels)
        cached = self._instances.get(kind)
        data = np.empty(n, dtype=[("m", "f4", 16), ("c", "f4", 4), ("l", "i4"), ("s", "i4")])
        data["m"] = inst.poses.transpose(0, 2, 1).reshape(n, 16)  # column-major for GLSL's mat4(columns)
        data["c"] = inst.colours
        data["l"] = inst.labels
        data["s"] = inst.surfaces
        raw = data.tobytes()
        if cached is None or cached[1].size < len(raw):
            buffer = self.ctx.buffer(reserve=max(len(raw), 64 * data.itemsize))
            vao = self.ctx.vertex_array(self.program, [
                (self.meshes[kind], "3f 3f", "in_position", "in_normal"),
                (buffer, "4f 4f 4f 4f 4f 1i 1i/i", "in_m0", "in_m1", "in_m2", "in_m3", "in_colour", "in_label",
                 "in_surface"),
            ])
            cached = (vao, buffer)
            self._instances[kind] = cached
        cached[1].write(raw)
        return cached[0]

    def release(self) -> None:
        self.ctx.release()


def projection_matrix(width: int, height: int, fx: float, fy: float, cx: float, cy: float, near: float,
                      far: float) -> np.ndarray:
    """OpenGL clip matrix of a pinhole camera (OpenCV pixel centres), image row 0 at the top of the read-back.

    Eye space is OpenGL's (x right, y up, looking down -z); NDC y grows with the image row v, so the framebuffer's
    first row (glReadPixels' bottom) is the image's top row.
    """
    p = np.zeros((4, 4))
    p[0, 0] = 2 * fx / width
    p[0, 2] = (width - 2 * cx - 1) / width
    p[1, 1] = -2 * fy / height
    p[1, 2] = (height - 2 * cy - 1) / height
    p[2, 2] = -(far + near) / (far - near)
    p[2, 3] = -2 * far * near / (far - near)
    p[3, 2] = -1.0
    return p


def view_matrix(position: np.ndarray, rotation: np.ndarray, forward: np.ndarray, up: np.ndarray) -> np.ndarray:
    """World -> OpenGL eye matrix of a camera body at (position, rotation) whose optical axis is ``forward`` and
    image up ``up`` in its own frame."""
    f = rotation @ forward
    u = rotation @ up
    u = u - f * float(f @ u)
    u /= np.linalg.norm(u)
    r = np.cross(f, u)
    axes = np.stack([r, u, -f])
    out = np.eye(4)
    out[:3, :3] = axes
    out[:3, 3] = -axes @ position
    return out


def _unit_mesh(kind: str) -> np.ndarray:
    """Triangles of a unit shape as (N, 6) rows of position and normal: box edges 1, cylinder radius 1 and
    length 1 along z, sphere radius 1."""
    if kind == "box":
        return _box()
    if kind == "cylinder":
        return _cylinder()
    return _sphere()


def _box() -> np.ndarray:
    rows = []
    for axis in range(3):
        for sign in (-1.0, 1.0):
            n = np.zeros(3)
            n[axis] = sign
            a, b = [i for i in range(3) if i != axis]
            corners = []
            for da, db in ((-1, -1), (1, -1), (1, 1), (-1, 1)):
                c = np.zeros(3)
                c[axis], c[a], c[b] = sign * 0.5, da * 0.5, db * 0.5
                corners.append(c)
            for i in (0, 1, 2, 0, 2, 3):
                rows.append(np.concatenate([corners[i], n]))
    return np.array(rows)


def _cylinder() -> np.ndarray:
    rows = []
    k = CYLINDER_SEGMENTS
    for i in range(k):
        a0, a1 = 2 * math.pi * i / k, 2 * math.pi * (i + 1) / k
        p0, p1 = np.array([math.cos(a0), math.sin(a0)]), np.array([math.cos(a1), math.sin(a1)])
        for z0, z1 in ((-0.5, 0.5),):
            quad = [(p0, z0), (p1, z0), (p1, z1), (p0, z1)]
            for j in (0, 1, 2, 0, 2, 3):
                xy, z = quad[j]
                rows.append([xy[0], xy[1], z, xy[0], xy[1], 0.0])
        for z, nz in ((0.5, 1.0), (-0.5, -1.0)):
            for xy in (np.zeros(2), p0, p1):
                rows.append([xy[0], xy[1], z, 0.0, 0.0, nz])
    return np.array(rows)


def _sphere() -> np.ndarray:
    rows = []
    for i in range(SPHERE_RINGS):
        t0, t1 = math.pi * i / SPHERE_RINGS, math.pi * (i + 1) / SPHERE_RINGS
        for j in range(SPHERE_SEGMENTS):
            f0, f1 = 2 * math.pi * j / SPHERE_SEGMENTS, 2 * math.pi * (j + 1) / SPHERE_SEGMENTS
            quad = [_on_sphere(t0, f0), _on_sphere(t1, f0), _on_sphere(t1, f1), _on_sphere(t0, f1)]
            for k in (0, 1, 2, 0, 2, 3):
                rows.append(np.concatenate([quad[k], quad[k]]))
    return np.array(rows)


def _on_sphere(theta: float, phi: float) -> np.ndarray:
    return np.array([math.sin(theta) * math.cos(phi), math.sin(theta) * math.sin(phi), math.cos(theta)])

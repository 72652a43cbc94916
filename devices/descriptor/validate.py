"""Descriptor documents (YAML source or decoded msgpack) -> validated :class:`PartDescriptor`, and back.

One document format serves both: the catalog's YAML and the msgpack a part stores are the same tree, the stored
one with every default filled in. Every error names the part and the field (``bodies[1].inertia``) and, for
YAML sources, file:line.
"""
from __future__ import annotations

import difflib
import hashlib
import math
from typing import Any, Mapping

from .camera import CameraParamError, camera_spec
from .schema import (JOINT_TYPES, KINDS, SCHEMA_VERSION, SHAPE_KINDS, Body, DriverCode, Inertial, Joint,
                     JointLimits, PartDescriptor, Port, Pose, RegisterSpec, Sensor, Shape)

SHAPE_SIZES = {"box": 3, "cylinder": 2, "capsule": 2, "sphere": 1, "mesh": 0}
INERTIA_KEYS = ("ixx", "iyy", "izz", "ixy", "ixz", "iyz")
# Bounds on what a descriptor may claim: a part of a robot, not a planet. Finite values beyond
# these are typos or attacks, and would make the physics or the model meaningless.
MAX_PART_MASS_KG = 1000.0
MAX_PART_SIZE_M = 100.0  # positions, sizes and offsets inside one part
MAX_MAGNITUDE = 1e9  # any other number (register scales, limits, damping)
TOP_KEYS = ("schema", "name", "kind", "bodies", "registers", "joints", "ports", "sensors", "driver", "model_number",
            "vendor", "description")
BODY_KEYS = ("name", "mass", "com", "inertia", "visuals", "collisions", "friction", "surface")
POSE_KEYS = ("xyz", "rpy")
JOINT_KEYS = ("name", "type", "parent", "child", *POSE_KEYS, "axis", "limits", "damping", "friction", "registers")
LIMIT_KEYS = ("lower", "upper", "effort", "velocity")
PORT_KEYS = ("name", "body", *POSE_KEYS, "parent")
REGISTER_KEYS = ("name", "address", "size", "signed", "access", "area", "default", "minimum", "maximum", "unit",
                 "scale", "offset")
SENSOR_KEYS = ("name", "kind", "body", "params")
DRIVER_KEYS = ("source", "sha256", "signature", "key_id")
JOINT_REGISTER_ROLES = ("goal_position", "present_position", "goal_velocity", "present_velocity", "goal_current",
                        "present_current", "torque_enable", "operating_mode")


class DescriptorError(ValueError):
    """A descriptor that fails validation: which part, which field, what is wrong (and where, for YAML)."""

    def __init__(self, part: str, field: str, message: str, location: str = ""):
        self.part, self.field, self.message, self.location = part, field, message, location
        where = f"{location}: " if location else ""
        super().__init__(f"{where}part {part!r}: {field}: {message}")


class _Checker:
    """Carries the part name and builds errors with the YAML line when the document has one."""

    def __init__(self, part: str, source: str = ""):
        self.part = part
        self.source = source  # the document's file: named even for a value with no line of its own (a null)

    def fail(self, node: Any, key: str | None, field: str, message: str) -> DescriptorError:
        location = ""
        if hasattr(node, "source") and hasattr(node, "line"):
            line = node.line_of(key) if key is not None and hasattr(node, "line_of") else node.line
            location = f"{node.source}:{line}"
        elif self.source:
            location = self.source
        return DescriptorError(self.part, field, message, location)

    def get(self, node: Any, key: str, field: str, kind: type | tuple, default: Any = ...) -> Any:
        if not isinstance(node, Mapping):
            raise self.fail(node, None, field, f"must be a mapping, not {type(node).__name__}")
        if key not in node:
            if default is ...:
                raise self.fail(node, None, f"{field}.{key}" if field else key, "missing field")
            return default
        value = node[key]
        if kind is float and isinstance(value, int) and not isinstance(value, bool):
            value = float(value)
        if not isinstance(value, kind) or (isinstance(value, bool) and kind in (int, float)):
            want = kind.__name__ if isinstance(kind, type) else "/".join(k.__name__ for k in kind)
            raise self.fail(node, key, f"{field}.{key}" if field else key, f"must be {want}, not {value!r}")
        if kind is float and not math.isfinite(value):
            raise self.fail(node, key, f"{field}.{key}" if field else key, f"must be finite, not {value}")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and abs(value) > MAX_MAGNITUDE:
            raise self.fail(node, key, f"{field}.{key}" if field else key,
                            f"{value:g} is beyond MAX_MAGNITUDE={MAX_MAGNITUDE:g}")
        return value

    def keys(self, node: Any, known: tuple[str, ...], field: str) -> None:
        """Refuse a key the schema does not have, with the closest one (a typo would be silently dropped)."""
        if not isinstance(node, Mapping):
            return
        for key in node:
            if key not in known:
                close = difflib.get_close_matches(str(key), known, n=1)
                hint = f"did you mean {close[0]!r}?" if close else f"known: {', '.join(known)}"
                raise self.fail(node, key, f"{field}.{key}" if field else str(key), f"unknown key; {hint}")

    def vec(self, node: Any, key: str, field: str, n: int, default: Any = ...) -> tuple[float, ...]:
        value = self.get(node, key, field, (list, tuple), default)
        if value is default and default is not ...:
            return tuple(default)
        if len(value) != n or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            raise self.fail(node, key, f"{field}.{key}", f"must be {n} numbers, not {value!r}")
        if not all(math.isfinite(v) for v in value):
            raise self.fail(node, key, f"{field}.{key}", f"must be finite, not {value!r}")
        if any(abs(v) > MAX_PART_SIZE_M for v in value):
            raise self.fail(node, key, f"{field}.{key}", f"{list(value)!r} is beyond MAX_PART_SIZE_M="
                                                          f"{MAX_PART_SIZE_M:g} (metres or radians within one part)")
        return tuple(float(v) for v in value)

    def unique(self, names: list[str], node: Any, field: str) -> None:
        seen = set()
        for name in names:
            if name in seen:
                raise self.fail(node, None, field, f"name {name!r} appears twice")
            seen.add(name)


def descriptor_from_dict(doc: Mapping, part: str | None = None) -> PartDescriptor:
    """Validate a descriptor document; ``part`` labels errors (defaults to the document's name)."""
    label = part or (doc.get("name") if isinstance(doc, Mapping) and isinstance(doc.get("name"), str) else "?")
    c = _Checker(label, getattr(doc, "source", ""))
    if not isinstance(doc, Mapping):
        raise c.fail(doc, None, "descriptor", f"must be a mapping, not {type(doc).__name__}")
    c.keys(doc, TOP_KEYS, "")
    schema = c.get(doc, "schema", "", int)
    if schema != SCHEMA_VERSION:
        raise c.fail(doc, "schema", "schema", f"version {schema} is not supported (this runtime reads {SCHEMA_VERSION})")
    name = c.get(doc, "name", "", str)
    kind = c.get(doc, "kind", "", str)
    if kind not in KINDS:
        raise c.fail(doc, "kind", "kind", f"{kind!r} is not one of {', '.join(KINDS)}")
    bodies = _bodies(c, doc)
    body_names = {b.name for b in bodies}
    registers = _registers(c, doc)
    register_names = {r.name for r in registers}
    joints = _joints(c, doc, [b.name for b in bodies], register_names)
    ports = _ports(c, doc, body_names, bodies[0].name)
    sensors = _sensors(c, doc, body_names)
    driver = _driver(c, doc)
    model_number = c.get(doc, "model_number", "", int, 0)
    if not 0 <= model_number <= 0xFFFF:
        raise c.fail(doc, "model_number", "model_number", f"{model_number} does not fit 16 bits")
    return PartDescriptor(name=name, kind=kind, bodies=bodies, ports=ports, joints=joints, registers=registers,
                          sensors=sensors, driver=driver, model_number=model_number,
                          vendor=c.get(doc, "vendor", "", str, ""), description=c.get(doc, "description", "", str, ""),
                          schema=schema)


def _surface(c: _Checker, node: Any, field: str) -> str | None:
    """A body's surface: a name (letters, digits, _); in a YAML file (the catalog, a user's part) also one the
    surface table knows, at file:line. Bytes read from a part are checked for the name's form only: the table
    belongs to whoever builds a world from them (firmware_sim/world checks it there)."""
    surface = c.get(node, "surface", field, (str, type(None)), None)
    if surface is None:
        return None
    if not surface or len(surface) > 40 or not surface.replace("_", "").isalnum():
        raise c.fail(node, "surface", f"{field}.surface", f"must be a word of letters, digits and _, not {surface!r}")
    if hasattr(node, "source"):
        from ..surfaces import load_surfaces

        table = load_surfaces()
        if surface not in table.laws:
            raise c.fail(node, "surface", f"{field}.surface", f"unknown surface {surface!r}; known surfaces: "
                                                              f"{', '.join(table.names)}")
    return surface


def _pose(c: _Checker, node: Any, field: str) -> Pose:
    return Pose(c.vec(node, "xyz", field, 3, (0.0, 0.0, 0.0)), c.vec(node, "rpy", field, 3, (0.0, 0.0, 0.0)))


def _list(c: _Checker, doc: Any, key: str, required: bool = False) -> list:
    value = c.get(doc, key, "", (list, tuple), ... if required else [])
    if required and not value:
        raise c.fail(doc, key, key, "must list at least one entry")
    return list(value)


def _bodies(c: _Checker, doc: Mapping) -> tuple[Body, ...]:
    nodes = _list(c, doc, "bodies", required=True)
    bodies = []
    for i, node in enumerate(nodes):
        f = f"bodies[{i}]"
        c.keys(node, BODY_KEYS, f)
        name = c.get(node, "name", f, str)
        mass = c.get(node, "mass", f, float)
        if not 0 < mass <= MAX_PART_MASS_KG:
            raise c.fail(node, "mass", f"{f}.mass", f"must be in (0, MAX_PART_MASS_KG={MAX_PART_MASS_KG:g}] kg, "
                                                    f"not {mass:g}")
        com = c.vec(node, "com", f, 3, (0.0, 0.0, 0.0))
        inertia = _inertia(c, node, f)
        visuals = tuple(_shape(c, s, f"{f}.visuals[{k}]") for k, s in enumerate(_list(c, node, "visuals")))
        collisions = tuple(_shape(c, s, f"{f}.collisions[{k}]") for k, s in enumerate(_list(c, node, "collisions")))
        friction = c.get(node, "friction", f, (float, type(None)), None)
        if friction is not None and friction < 0:
            raise c.fail(node, "friction", f"{f}.friction", f"must be >= 0, not {friction}")
        bodies.append(Body(name, Inertial(mass, com, inertia), visuals, collisions, friction,
                           _surface(c, node, f)))
    c.unique([b.name for b in bodies], doc, "bodies")
    return tuple(bodies)


def _inertia(c: _Checker, node: Any, f: str):
    raw = c.get(node, "inertia", f, Mapping)
    c.keys(raw, INERTIA_KEYS, f"{f}.inertia")
    values = {k: c.get(raw, k, f"{f}.inertia", float, 0.0) for k in INERTIA_KEYS}
    m = ((values["ixx"], values["ixy"], values["ixz"]),
         (values["ixy"], values["iyy"], values["iyz"]),
         (values["ixz"], values["iyz"], values["izz"]))
    eig = principal_moments(m)
    shown = [round(e, 9) for e in eig]
    if eig[0] <= 0:
        raise c.fail(node, "inertia", f"{f}.inertia", f"is not positive definite (principal moments {shown})")
    a, b, cc = eig
    if cc > a + b + 1e-12 * cc:
        raise c.fail(node, "inertia", f"{f}.inertia",
                     f"violates the triangle inequality: principal moments {shown} (largest > sum of the others)")
    return tuple(tuple(float(x) for x in row) for row in m)


def principal_moments(m: tuple[tuple[float, ...], ...]) -> tuple[float, float, float]:
    """The eigenvalues of a symmetric 3x3 matrix, smallest first, by cyclic Jacobi rotations (accurate to rounding,
    as numpy's eigvalsh, also for the equal moments of a square plate). Plain floats rather than numpy: every process
    that loads a part (each ``hil sim``, each trial) checks inertias, and most never need numpy otherwise (its
    import is ~0.1 CPU s, a third of a ``hil sim``'s start)."""
    a = [list(row) for row in m]
    for _ in range(50):  # converges quadratically: a handful of sweeps
        off = a[0][1] ** 2 + a[0][2] ** 2 + a[1][2] ** 2
        if off <= 1e-36 * (a[0][0] ** 2 + a[1][1] ** 2 + a[2][2] ** 2) or off == 0.0:
            break
        for p, q in ((0, 1), (0, 2), (1, 2)):
            if a[p][q] == 0.0:
                continue
            theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q])
            t = math.copysign(1.0, theta) / (abs(theta) + math.sqrt(theta * theta + 1.0))
            c = 1.0 / math.sqrt(t * t + 1.0)
            s = t * c
            r = 3 - p - q  # the third index
            a[p][p] -= t * a[p][q]
            a[q][q] += t * a[p][q]
            a[p][q] = a[q][p] = 0.0
            arp, arq = a[r][p], a[r][q]
            a[r][p] = a[p][r] = c * arp - s * arq
            a[r][q] = a[q][r] = s * arp + c * arq
    return tuple(sorted((a[0][0], a[1][1], a[2][2])))  # type: ignore[return-value]


def _shape(c: _Checker, node: Any, f: str) -> Shape:
    kinds = [k for k in SHAPE_KINDS if isinstance(node, Mapping) and k in node]
    if len(kinds) != 1:
        raise c.fail(node, None, f, f"must have exactly one of {', '.join(SHAPE_KINDS)}")
    kind = kinds[0]
    c.keys(node, (kind, *POSE_KEYS, "rgba"), f)
    rgba = c.vec(node, "rgba", f, 4, (0.6, 0.6, 0.6, 1.0))
    if not all(0.0 <= v <= 1.0 for v in rgba):
        raise c.fail(node, "rgba", f"{f}.rgba", "components must be in [0, 1]")
    pose = _pose(c, node, f)
    if kind == "mesh":
        mesh = c.get(node, "mesh", f, Mapping)
        vertices = tuple(c.vec({"v": v}, "v", f"{f}.mesh.vertices[{i}]", 3) for i, v in enumerate(mesh.get("vertices", [])))
        triangles = tuple(tuple(int(i) for i in t) for t in mesh.get("triangles", []))
        if not vertices or not triangles or any(len(t) != 3 or not all(0 <= i < len(vertices) for i in t) for t in triangles):
            raise c.fail(node, "mesh", f"{f}.mesh", "needs vertices and triangles indexing them")
        return Shape("mesh", (), pose, rgba, vertices, triangles)
    size = c.vec(node, kind, f, SHAPE_SIZES[kind])
    if any(v <= 0 for v in size):
        raise c.fail(node, kind, f"{f}.{kind}", f"sizes must be positive, not {list(size)}")
    return Shape(kind, size, pose, rgba)


def _registers(c: _Checker, doc: Mapping) -> tuple[RegisterSpec, ...]:
    specs = []
    for i, node in enumerate(_list(c, doc, "registers")):
        f = f"registers[{i}]"
        c.keys(node, REGISTER_KEYS, f)
        spec = RegisterSpec(
            name=c.get(node, "name", f, str), address=c.get(node, "address", f, int), size=c.get(node, "size", f, int),
            signed=c.get(node, "signed", f, bool, False), access=c.get(node, "access", f, str, "R"),
            area=c.get(node, "area", f, str, "RAM"), default=c.get(node, "default", f, int, 0),
            minimum=c.get(node, "minimum", f, (int, type(None)), None),
            maximum=c.get(node, "maximum", f, (int, type(None)), None),
            unit=c.get(node, "unit", f, str, ""), scale=c.get(node, "scale", f, float, 1.0),
            offset=c.get(node, "offset", f, float, 0.0))
        if not 0 <= spec.address <= 0xFFFF or spec.size < 1 or spec.address + spec.size > 0x10000:
            raise c.fail(node, "address", f, f"address {spec.address} + size {spec.size} leaves the 64 KiB table")
        if spec.access not in ("R", "RW"):
            raise c.fail(node, "access", f"{f}.access", f"must be R or RW, not {spec.access!r}")
        if spec.area not in ("RAM", "EEPROM"):
            raise c.fail(node, "area", f"{f}.area", f"must be RAM or EEPROM, not {spec.area!r}")
        if spec.access == "RW" and spec.size not in (1, 2, 4, 8):
            raise c.fail(node, "size", f"{f}.size", "a writable register is 1, 2, 4 or 8 bytes")
        if spec.scale == 0:
            raise c.fail(node, "scale", f"{f}.scale", "must not be 0 (the conversion must be invertible)")
        specs.append(spec)
    c.unique([s.name for s in specs], doc, "registers")
    ordered = sorted(specs, key=lambda s: s.address)
    for a, b in zip(ordered, ordered[1:]):
        if a.address + a.size > b.address:
            raise c.fail(doc, "registers", "registers", f"{a.name} overlaps {b.name} at address {b.address}")
    return tuple(specs)


def _joints(c: _Checker, doc: Mapping, body_names: list[str], register_names: set[str]) -> tuple[Joint, ...]:
    joints = []
    child_of: dict[str, str] = {}
    for i, node in enumerate(_list(c, doc, "joints")):
        f = f"joints[{i}]"
        c.keys(node, JOINT_KEYS, f)
        name = c.get(node, "name", f, str)
        jtype = c.get(node, "type", f, str)
        if jtype not in JOINT_TYPES:
            raise c.fail(node, "type", f"{f}.type", f"{jtype!r} is not one of {', '.join(JOINT_TYPES)}")
        parent, child = c.get(node, "parent", f, str), c.get(node, "child", f, str)
        for role, body in (("parent", parent), ("child", child)):
            if body not in body_names:
                raise c.fail(node, role, f"{f}.{role}", f"no body named {body!r} (bodies: {', '.join(body_names)})")
        if child == body_names[0]:
            raise c.fail(node, "child", f"{f}.child", f"{child!r} is the part's base body and cannot be a child")
        if child in child_of:
            raise c.fail(node, "child", f"{f}.child", f"{child!r} is already the child of joint {child_of[child]!r}")
        child_of[child] = name
        axis = c.vec(node, "axis", f, 3, (0.0, 0.0, 1.0))
        norm = math.sqrt(sum(v * v for v in axis))
        if jtype != "fixed" and norm < 1e-9:
            raise c.fail(node, "axis", f"{f}.axis", "must not be zero")
        axis = tuple(v / norm for v in axis) if norm else axis
        limits = _limits(c, node, f, jtype)
        regs = c.get(node, "registers", f, Mapping, {})
        for role, reg in regs.items():
            if role not in JOINT_REGISTER_ROLES:
                raise c.fail(regs, role, f"{f}.registers", f"unknown role {role!r}; roles: {', '.join(JOINT_REGISTER_ROLES)}")
            if reg not in register_names:
                raise c.fail(regs, role, f"{f}.registers.{role}", f"register {reg!r} is not declared in registers")
        joints.append(Joint(name, jtype, parent, child, _pose(c, node, f), axis, limits,
                            c.get(node, "damping", f, float, 0.0), c.get(node, "friction", f, float, 0.0),
                            dict(regs)))
    c.unique([j.name for j in joints], doc, "joints")
    orphans = [b for b in body_names[1:] if b not in child_of]
    if orphans:
        raise c.fail(doc, "bodies", "bodies", f"{', '.join(orphans)} not attached by any joint (every body but the first needs one)")
    _check_tree(c, doc, joints, body_names[0])
    return tuple(joints)


def _limits(c: _Checker, node: Any, f: str, jtype: str) -> JointLimits:
    raw = c.get(node, "limits", f, Mapping, {})
    c.keys(raw, LIMIT_KEYS, f"{f}.limits")
    limits = JointLimits(*(c.get(raw, k, f"{f}.limits", float, 0.0) for k in ("lower", "upper", "effort", "velocity")))
    if jtype in ("revolute", "prismatic") and limits.lower > limits.upper:
        raise c.fail(node, "limits", f"{f}.limits", f"lower {limits.lower} > upper {limits.upper}")
    if limits.effort < 0 or limits.velocity < 0:
        raise c.fail(node, "limits", f"{f}.limits", "effort and velocity limits must be >= 0")
    return limits


def _check_tree(c: _Checker, doc: Mapping, joints: list[Joint], root: str) -> None:
    parent_of = {j.child: j.parent for j in joints}
    for body in parent_of:
        seen, cur = set(), body
        while cur != root:
            if cur in seen or cur not in parent_of:
                raise c.fail(doc, "joints", "joints", f"body {body!r} does not reach the base body {root!r} (cycle)")
            seen.add(cur)
            cur = parent_of[cur]


def _ports(c: _Checker, doc: Mapping, body_names: set[str], base_body: str) -> tuple[Port, ...]:
    ports = []
    for i, node in enumerate(_list(c, doc, "ports", required=True)):
        f = f"ports[{i}]"
        c.keys(node, PORT_KEYS, f)
        body = c.get(node, "body", f, str)
        if body not in body_names:
            raise c.fail(node, "body", f"{f}.body", f"no body named {body!r}")
        ports.append(Port(c.get(node, "name", f, str), body, _pose(c, node, f), c.get(node, "parent", f, bool, False)))
    c.unique([p.name for p in ports], doc, "ports")
    parents = [p.name for p in ports if p.parent]
    if len(parents) != 1:
        raise c.fail(doc, "ports", "ports", f"exactly one port must be the parent connector, found {parents or 'none'}")
    parent = next(p for p in ports if p.parent)
    if parent.body != base_body:
        raise c.fail(doc, "ports", "ports", f"the parent connector {parent.name!r} must be on the base body {base_body!r}")
    if len(ports) > 16:
        raise c.fail(doc, "ports", "ports", f"{len(ports)} ports; the CPC port table holds 16")
    return tuple(ports)


def _sensors(c: _Checker, doc: Mapping, body_names: set[str]) -> tuple[Sensor, ...]:
    sensors = []
    for i, node in enumerate(_list(c, doc, "sensors")):
        f = f"sensors[{i}]"
        c.keys(node, SENSOR_KEYS, f)
        body = c.get(node, "body", f, str)
        if body not in body_names:
            raise c.fail(node, "body", f"{f}.body", f"no body named {body!r}")
        params = c.get(node, "params", f, Mapping, {})
        if node.get("kind") == "camera":
            _check_camera(c, params, f)
        sensors.append(Sensor(c.get(node, "name", f, str), c.get(node, "kind", f, str), body, _plain(params)))
    c.unique([s.name for s in sensors], doc, "sensors")
    return tuple(sensors)


def _check_surface_names(names: tuple[str, ...], key: str) -> None:
    """Each of ``names`` one the surface table knows, else a CameraParamError at ``key.NAME``."""
    from ..surfaces import load_surfaces

    table = load_surfaces()
    for name in names:
        if name not in table.laws:
            raise CameraParamError(f"{key}.{name}", f"unknown surface {name!r}; known surfaces: "
                                                    f"{', '.join(table.names)} (config/surfaces/*.yaml)")


def _check_camera(c: _Checker, params: Mapping, f: str) -> None:
    """A camera's params checked whole at load (devices/descriptor/camera.py), the error at the bad key's line."""
    try:
        spec = camera_spec(params)
        if spec.depth.surfaces and hasattr(params, "source"):  # a YAML file: its surfaces known to the table
            _check_surface_names(tuple(s.name for s in spec.depth.surfaces), "depth.surfaces")
    except CameraParamError as exc:
        *path, key = exc.key.split(".")
        node, where = params, None  # the deepest mapping on the key's path, and the key in it that is there
        for part in path:
            if not isinstance(node.get(part), Mapping):
                where = part if part in node else None
                break
            node = node[part]
        else:
            where = key if key in node else None
        raise c.fail(node, where, f"{f}.params.{exc.key}", exc.message) from None


def _driver(c: _Checker, doc: Mapping) -> DriverCode | None:
    node = c.get(doc, "driver", "", (Mapping, type(None)), None)
    if node is None:
        return None
    c.keys(node, DRIVER_KEYS, "driver")
    source = c.get(node, "source", "driver", str)
    digest = c.get(node, "sha256", "driver", str)
    actual = hashlib.sha256(source.encode()).hexdigest()
    if digest != actual:
        raise c.fail(node, "sha256", "driver.sha256", f"{digest[:16]}... does not match the source ({actual[:16]}...)")
    return DriverCode(source, digest, c.get(node, "signature", "driver", str, ""), c.get(node, "key_id", "driver", str, ""))


def _plain(value: Any) -> Any:
    """YAML-positioned containers -> plain dicts/lists (what msgpack stores)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def descriptor_to_dict(desc: PartDescriptor) -> dict:
    """The canonical document of ``desc`` (every default filled in): what a part stores, msgpack-encoded."""
    def pose(p: Pose) -> dict:
        return {"xyz": list(p.xyz), "rpy": list(p.rpy)}

    def shape(s: Shape) -> dict:
        out: dict[str, Any] = {}
        if s.kind == "mesh":
            out["mesh"] = {"vertices": [list(v) for v in s.vertices], "triangles": [list(t) for t in s.triangles]}
        else:
            out[s.kind] = list(s.size)
        out.update(pose(s.pose))
        out["rgba"] = list(s.rgba)
        return out

    def inertia(m) -> dict:
        return {"ixx": m[0][0], "iyy": m[1][1], "izz": m[2][2], "ixy": m[0][1], "ixz": m[0][2], "iyz": m[1][2]}

    doc: dict[str, Any] = {
        "schema": desc.schema, "name": desc.name, "kind": desc.kind, "model_number": desc.model_number,
        "vendor": desc.vendor, "description": desc.description,
        "bodies": [{"name": b.name, "mass": b.inertial.mass, "com": list(b.inertial.com),
                    "inertia": inertia(b.inertial.inertia), "visuals": [shape(s) for s in b.visuals],
                    "collisions": [shape(s) for s in b.collisions], "friction": b.friction,
                    **({"surface": b.surface} if b.surface is not None else {})} for b in desc.bodies],
        "joints": [{"name": j.name, "type": j.type, "parent": j.parent, "child": j.child, **pose(j.pose),
                    "axis": list(j.axis), "limits": {"lower": j.limits.lower, "upper": j.limits.upper,
                                                     "effort": j.limits.effort, "velocity": j.limits.velocity},
                    "damping": j.damping, "friction": j.friction, "registers": dict(j.registers)} for j in desc.joints],
        "ports": [{"name": p.name, "body": p.body, **pose(p.pose), "parent": p.parent} for p in desc.ports],
        "registers": [{"name": r.name, "address": r.address, "size": r.size, "signed": r.signed, "access": r.access,
                       "area": r.area, "default": r.default, "minimum": r.minimum, "maximum": r.maximum,
                       "unit": r.unit, "scale": r.scale, "offset": r.offset} for r in desc.registers],
        "sensors": [{"name": s.name, "kind": s.kind, "body": s.body, "params": _plain(s.params)} for s in desc.sensors],
        "driver": None if desc.driver is None else {"source": desc.driver.source, "sha256": desc.driver.sha256,
                                                    "signature": desc.driver.signature, "key_id": desc.driver.key_id},
    }
    return doc

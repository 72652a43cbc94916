"""The crowd's maps (config/maps/*.yaml): the world's walls plus what pedestrians need to find their way.

The walls use exactly the physics world's format (firmware_sim/world/maps.py), so one file drives both the
pybullet walls and the crowd; the world ignores the three sections it has no use for::

    name: arcade
    defaults: {thickness: 0.2, height: 3.0}
    walls:
      - {from: [-20, -10], to: [-20, -1.5], name: west_south}
    places:                                   # named points on the floor
      fountain: [0, 2.5]
    entrances:                                # named points on the boundary where people come in and/or leave
      west_gate: {at: [-20, 0], width: 3.0, role: both}     # role: entrance | exit | both (default both)
    graph:                                    # the passage graph; entrances are nodes too
      nodes:
        west_hall: [-18, 0]
      edges:
        - [west_gate, west_hall]              # a node with 3+ edges is a branch (or, walking the other way, a merge)
    plazas:                                   # open areas: a rectangle [[x0, y0], [x1, y1]] or a polygon
      central_plaza: {rect: [[-5, -6.5], [5, 6.5]]}

Routes (:meth:`CrowdMap.route`) run along the graph: from where the agent stands to a graph node it can see, along
the shortest chain of edges, and from the last node it needs to the target. Names are unique across nodes,
entrances, places and plazas (``robot`` is reserved), so ``move kid to fountain`` means one thing. Every error
names file:line, and a map is loaded whole or not at all (graph edges that cross a wall are errors too: a route
must never lead into one). Keep places off walls: the wall force holds people off a wall's face, so a goal where
a body's surface would be closer than ~0.25 m to a face is never reached.
"""
from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from hil.devices.map_format import (
    MAX_COORDINATE_M,
    TASK_SECTIONS,
    Wall,
    is_number,
    no_unknown,
    parse_walls,
    positive,
    resolve_map,
)
from hil.devices.yaml_source import ConfigError, SourceDict, load_yaml_file, require

SECTIONS = ("name", "defaults", "walls", "places", "entrances", "graph", "plazas")
ENTRANCE_KEYS = ("at", "width", "role")
ROLES = ("entrance", "exit", "both")
DEFAULT_GATE_WIDTH = 1.0
RESERVED_NAME = "robot"
VISIBILITY_CLEARANCE = 0.3  # metres of free space a straight leg of a route keeps from walls (a body's half width)

Point = tuple[float, float]


@dataclass(frozen=True)
class Entrance:
    """A gate in the boundary: ``point`` is its centre, ``width`` the opening people pass through."""

    name: str
    point: Point
    width: float
    is_entrance: bool
    is_exit: bool
    line: int = 0


@dataclass(frozen=True)
class Plaza:
    """An open area, as a polygon (a rectangle is stored as its four corners)."""

    name: str
    polygon: tuple[Point, ...]
    line: int = 0

    @property
    def centroid(self) -> Point:
        """The area centroid (shoelace), where ``move X to <plaza>`` leads."""
        xs = np.array([p[0] for p in self.polygon])
        ys = np.array([p[1] for p in self.polygon])
        x1, y1 = np.roll(xs, -1), np.roll(ys, -1)
        cross = xs * y1 - x1 * ys
        area = cross.sum() / 2
        if abs(area) < 1e-12:
            return float(xs.mean()), float(ys.mean())
        return float(((xs + x1) * cross).sum() / (6 * area)), float(((ys + y1) * cross).sum() / (6 * area))

    def contains(self, xy: Point) -> bool:
        """Even-odd rule point-in-polygon."""
        x, y = xy
        inside = False
        pts = self.polygon
        for k in range(len(pts)):
            (x0, y0), (x1, y1) = pts[k], pts[(k + 1) % len(pts)]
            if (y0 > y) != (y1 > y) and x < x0 + (y - y0) * (x1 - x0) / (y1 - y0):
                inside = not inside
        return inside


@dataclass(frozen=True)
class CrowdMap:
    """Walls, gates, the passage graph, plazas and places of one map; routes between them."""

    name: str
    source: str
    walls: tuple[Wall, ...]
    places: dict[str, Point] = field(default_factory=dict)
    entrances: dict[str, Entrance] = field(default_factory=dict)
    nodes: dict[str, Point] = field(default_factory=dict)  # graph nodes, entrances included
    edges: tuple[tuple[str, str], ...] = ()
    plazas: dict[str, Plaza] = field(default_factory=dict)
    # Derived in __post_init__: walls as an (m, 4) array of [x0, y0, x1, y1] and their half thicknesses.
    wall_segments: np.ndarray = field(init=False, repr=False, compare=False)
    wall_half_thickness: np.ndarray = field(init=False, repr=False, compare=False)
    _node_names: list[str] = field(init=False, repr=False, compare=False)
    _node_xy: np.ndarray = field(init=False, repr=False, compare=False)
    _node_index: dict[str, int] = field(init=False, repr=False, compare=False)
    _adjacency: list[list[tuple[int, float]]] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # Derived lookups, built once: segment arrays for the force code and adjacency for routing.
        segs = np.array([[*w.start, *w.end] for w in self.walls], dtype=float).reshape(-1, 4)
        object.__setattr__(self, "wall_segments", segs)
        object.__setattr__(self, "wall_half_thickness", np.array([w.thickness / 2 for w in self.walls]))
        names = list(self.nodes)
        object.__setattr__(self, "_node_names", names)
        object.__setattr__(self, "_node_xy", np.array([self.nodes[n] for n in names], dtype=float).reshape(-1, 2))
        index = {n: k for k, n in enumerate(names)}
        adjacency: list[list[tuple[int, float]]] = [[] for _ in names]
        for a, b in self.edges:
            ia, ib = index[a], index[b]
            d = math.dist(self.nodes[a], self.nodes[b])
            adjacency[ia].append((ib, d))
            adjacency[ib].append((ia, d))
        object.__setattr__(self, "_node_index", index)
        object.__setattr__(self, "_adjacency", adjacency)

    # --- names -----------------------------------------------------------------------------------------------

    def names(self) -> list[str]:
        """Every name a route may lead to."""
        return [*self.nodes, *self.places, *self.plazas]

    def point(self, name: str) -> Point:
        """Where a name is: a graph node or entrance, a place, or a plaza's centroid."""
        if name in self.nodes:
            return self.nodes[name]
        if name in self.places:
            return self.places[name]
        if name in self.plazas:
            return self.plazas[name].centroid
        raise KeyError(f"map {self.name} has no place, node, entrance or plaza {name!r}; "
                       f"known: {', '.join(sorted(self.names()))}")

    def entrance_names(self) -> list[str]:
        """Gates people come in through, in file order."""
        return [n for n, e in self.entrances.items() if e.is_entrance]

    def exit_names(self) -> list[str]:
        """Gates people leave through, in file order."""
        return [n for n, e in self.entrances.items() if e.is_exit]

    def degree(self, node: str) -> int:
        return len(self._adjacency[self._node_index[node]])

    def branches(self) -> list[str]:
        """Nodes where passages branch or merge (3 or more edges)."""
        return [n for n in self._node_names if self.degree(n) >= 3]

    def plaza_at(self, xy: Point) -> str | None:
        """The plaza containing a point, if any."""
        for name, plaza in self.plazas.items():
            if plaza.contains(xy):
                return name
        return None

    # --- geometry --------------------------------------------------------------------------------------------

    def clear_path(self, a: Point, b: Point, clearance: float = VISIBILITY_CLEARANCE) -> bool:
        """True when a body can walk straight from a to b: the segment stays ``clearance`` off every wall face."""
        if not len(self.walls):
            return True
        d = segment_distances(np.array([[*a, *b]], dtype=float), self.wall_segments)[0]
        return bool(np.all(d > self.wall_half_thickness + clearance))

    def nearest_node(self, xy: Point) -> str:
        d = np.hypot(*(self._node_xy - np.asarray(xy, dtype=float)).T)
        return self._node_names[int(np.argmin(d))]

    # --- routes ----------------------------------------------------------------------------------------------

    def route(self, from_xy: Point, to: str | Point) -> list[Point]:
        """Waypoints from ``from_xy`` to ``to`` (a name or an (x, y)), along the passage graph; last = the goal.

        Shortest path over the graph plus straight legs from the start to every graph node it can see (and from
        every node that sees the goal to the goal, and start -> goal directly when nothing is in the way). When
        the start (or goal) sees no node, it joins the nearest one. The start itself is not a waypoint.
        """
        if isinstance(to, str):
            goal = self.point(to)
            goal_node = self._node_index.get(to)
        else:
            goal = (float(to[0]), float(to[1]))
            goal_node = None
        start = (float(from_xy[0]), float(from_xy[1]))
        n = len(self._node_names)
        src, dst = n, n + 1
        extra: dict[int, list[tuple[int, float]]] = {src: self._legs(start)}
        if goal_node is not None:
            target = goal_node
        else:
            target = dst
            if self.clear_path(start, goal):
                extra[src].append((dst, math.dist(start, goal)))
            for j, d in self._legs(goal):
                extra.setdefault(j, []).append((dst, d))
        path = self._dijkstra(src, target, extra)
        points = [self._node_xy[k] for k in path if k < n]
        out = [(float(p[0]), float(p[1])) for p in points]
        if goal_node is None:
            out.append(goal)
        # Drop repeats (a start or goal standing on a node).
        cleaned: list[Point] = []
        for p in out:
            if (not cleaned and math.dist(p, start) < 1e-9) or (cleaned and math.dist(p, cleaned[-1]) < 1e-9):
                continue
            cleaned.append(p)
        return cleaned or [goal]

    def _legs(self, xy: Point) -> list[tuple[int, float]]:
        """Straight legs between a free point and the graph nodes it sees (or the nearest, when it sees none)."""
        if not len(self._node_names):
            return []
        d = np.hypot(*(self._node_xy - np.asarray(xy)).T)
        if len(self.walls):
            legs = np.hstack([np.broadcast_to(np.asarray(xy, dtype=float), self._node_xy.shape), self._node_xy])
            gaps = segment_distances(legs, self.wall_segments) - self.wall_half_thickness[None, :]
            seen = np.all(gaps > VISIBILITY_CLEARANCE, axis=1)
        else:
            seen = np.ones(len(d), dtype=bool)
        visible = np.flatnonzero(seen)
        if not len(visible):
            visible = np.array([int(np.argmin(d))])
        return [(int(k), float(d[k])) for k in visible]

    def _dijkstra(self, src: int, dst: int, extra: dict[int, list[tuple[int, float]]]) -> list[int]:
        """Node indices from src to dst (exclusive of src); ties broken by index, so routes are deterministic."""
        best = {src: 0.0}
        prev: dict[int, int] = {}
        heap = [(0.0, src)]
        done: set[int] = set()
        while heap:
            dist, k = heapq.heappop(heap)
            if k in done:
                continue
            done.add(k)
            if k == dst:
                break
            nexts = list(self._adjacency[k]) if k < len(self._adjacency) else []
            nexts += extra.get(k, [])
            for j, w in nexts:
                nd = dist + w
                if nd < best.get(j, math.inf) - 1e-12:
                    best[j] = nd
                    prev[j] = k
                    heapq.heappush(heap, (nd, j))
        if dst not in best:
            raise ValueError(f"map {self.name}: no route found")  # unreachable: the loader checks connectivity
        path = [dst]
        while path[-1] != src:
            path.append(prev[path[-1]])
        return path[::-1][1:]


# --- geometry helpers (also used by the force code) ------------------------------------------------------------

def segment_distances(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Distance between every segment of ``a`` (k, 4) and every one of ``b`` (m, 4): shape (k, m)."""
    return segment_distance(a[:, None, :2], a[:, None, 2:], b[None, :, :2], b[None, :, 2:])


def segment_distance(p0: np.ndarray, p1: np.ndarray, q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """Distance between segments p0-p1 and q0-q1 (arrays of points, broadcasting over leading axes)."""
    cands = [
        _point_segment(p0, q0, q1), _point_segment(p1, q0, q1),
        _point_segment(q0, p0, p1), _point_segment(q1, p0, p1),
    ]
    d = np.minimum.reduce([np.broadcast_to(c, cands[0].shape) for c in cands])
    crossing = segments_cross(p0, p1, q0, q1)
    return np.where(crossing, 0.0, d)


def _point_segment(p: np.ndarray, s0: np.ndarray, s1: np.ndarray) -> np.ndarray:
    d = s1 - s0
    length2 = np.maximum((d * d).sum(-1), 1e-18)
    t = np.clip(((p - s0) * d).sum(-1) / length2, 0.0, 1.0)
    closest = s0 + t[..., None] * d
    return np.hypot(*(np.moveaxis(p - closest, -1, 0)))


def segments_cross(p0: np.ndarray, p1: np.ndarray, q0: np.ndarray, q1: np.ndarray) -> np.ndarray:
    """Proper or touching intersection of segments p0-p1 and q0-q1 (broadcasting over leading axes)."""
    def orient(a: np.ndarray, b: np.ndarray, c: np.ndarray) -> np.ndarray:
        return (b[..., 0] - a[..., 0]) * (c[..., 1] - a[..., 1]) - (b[..., 1] - a[..., 1]) * (c[..., 0] - a[..., 0])

    d1, d2 = orient(q0, q1, p0), orient(q0, q1, p1)
    d3, d4 = orient(p0, p1, q0), orient(p0, p1, q1)
    return (d1 * d2 <= 0) & (d3 * d4 <= 0) & ~((d1 == 0) & (d2 == 0) & (d3 == 0) & (d4 == 0))


# --- loading ---------------------------------------------------------------------------------------------------

def resolve_map_path(name_or_path: str | Path) -> Path:
    """A name under config/maps/ (``arcade``) or a path to a YAML file."""
    return resolve_map(name_or_path)


def load_crowd_map(name_or_path: str | Path) -> CrowdMap:
    """Load and check a map file whole; errors are ConfigError with file:line."""
    path = resolve_map_path(name_or_path)
    return parse_crowd_map(load_yaml_file(path, "map"), str(path))


def parse_crowd_map(doc: object, source: str) -> CrowdMap:
    """A CrowdMap from a loaded YAML document (devices.yaml_source), checked whole."""
    if not isinstance(doc, SourceDict):
        raise ConfigError(source, getattr(doc, "line", None), "a map must be a mapping with 'name' and 'walls'")
    no_unknown(doc, SECTIONS + TASK_SECTIONS, "map")  # start, goal: a trial's (trial/task.py)
    name = require(doc, "name", str, "map")
    walls = parse_walls(doc)
    names: dict[str, int] = {}  # every name -> its line, to refuse duplicates across sections
    places = _named_points(doc, "places", names)
    entrances = _entrances(doc, names)
    nodes, edges, edge_lines = _graph(doc, entrances, names)
    plazas = _plazas(doc, names)
    crowd_map = CrowdMap(name=name, source=source, walls=walls, places=places, entrances=entrances,
                         nodes=nodes, edges=edges, plazas=plazas)
    _check_edges(crowd_map, edge_lines, source)
    _check_connected(crowd_map, doc)
    return crowd_map


def _xy(value: object, where: ConfigError, what: str) -> Point:
    if not isinstance(value, list) or len(value) != 2 or not all(is_number(v) for v in value):
        raise ConfigError(where.source, where.line, f"{what} must be [x, y] in metres, not {value!r}")
    if any(abs(v) > MAX_COORDINATE_M for v in value):
        raise ConfigError(where.source, where.line, f"{what} {value!r} is beyond MAX_COORDINATE_M="
                                                    f"{MAX_COORDINATE_M:g} from the map's origin")
    return float(value[0]), float(value[1])


def _point(mapping: SourceDict, key: str, what: str) -> Point:
    if key not in mapping:
        raise mapping.error(None, f"{what}: missing field {key!r}")
    return _xy(mapping[key], mapping.error(key, ""), f"{what}: {key}")


def _claim(names: dict[str, int], name: object, mapping: SourceDict, what: str) -> str:
    if not isinstance(name, str) or not name:
        raise mapping.error(name if isinstance(name, str) else None, f"{what}: names must be non-empty strings")
    if name == RESERVED_NAME:
        raise mapping.error(name, f"{what}: {name!r} is reserved (``move X to robot`` means the robot)")
    if name in names:
        raise mapping.error(name, f"{what}: the name {name!r} is already used (line {names[name]}); names are "
                                  "unique across places, entrances, graph nodes and plazas")
    names[name] = mapping.line_of(name)
    return name


def _named_points(doc: SourceDict, key: str, names: dict[str, int]) -> dict[str, Point]:
    if key not in doc:
        return {}
    section = require(doc, key, dict, "map")
    out = {}
    for name in section:
        _claim(names, name, section, key)
        out[name] = _point(section, name, f"{key[:-1]} {name!r}")
    return out


def _entrances(doc: SourceDict, names: dict[str, int]) -> dict[str, Entrance]:
    if "entrances" not in doc:
        return {}
    section = require(doc, "entrances", dict, "map")
    out = {}
    for name in section:
        _claim(names, name, section, "entrances")
        what = f"entrance {name!r}"
        entry = require(section, name, dict, "entrances")
        no_unknown(entry, ENTRANCE_KEYS, what)
        point = _point(entry, "at", what)
        width = positive(entry, "width", what) if "width" in entry else DEFAULT_GATE_WIDTH
        role = require(entry, "role", str, what) if "role" in entry else "both"
        if role not in ROLES:
            raise entry.error("role", f"{what}: role must be one of {', '.join(ROLES)}, not {role!r}")
        out[name] = Entrance(name, point, width, role in ("entrance", "both"), role in ("exit", "both"),
                             entry.line)
    return out


def _graph(doc: SourceDict, entrances: dict[str, Entrance],
           names: dict[str, int]) -> tuple[dict[str, Point], tuple[tuple[str, str], ...], list[int]]:
    nodes: dict[str, Point] = {}
    if "graph" not in doc:
        if entrances:
            raise doc.error(None, "map: entrances need a 'graph' section (nodes and edges) that reaches them")
        return nodes, (), []
    graph = require(doc, "graph", dict, "map")
    no_unknown(graph, ("nodes", "edges"), "graph")
    node_doc = require(graph, "nodes", dict, "graph")
    for name in node_doc:
        _claim(names, name, node_doc, "graph nodes")
        nodes[name] = _point(node_doc, name, f"graph node {name!r}")
    for name, entrance in entrances.items():  # gates are nodes of the graph, after the passage nodes
        nodes[name] = entrance.point
    edges_doc = require(graph, "edges", list, "graph")
    edges: list[tuple[str, str]] = []
    lines: list[int] = []
    seen: dict[frozenset, int] = {}
    for k, edge in enumerate(edges_doc):
        line = edges_doc.line_of(k)
        if not isinstance(edge, list) or len(edge) != 2 or not all(isinstance(e, str) for e in edge):
            raise ConfigError(edges_doc.source, line, f"graph edge #{k + 1} must be [node, node], not {edge!r}")
        for end in edge:
            if end not in nodes:
                raise ConfigError(edges_doc.source, line, f"graph edge #{k + 1}: unknown node {end!r}; nodes and "
                                                          f"entrances: {', '.join(nodes)}")
        if edge[0] == edge[1]:
            raise ConfigError(edges_doc.source, line, f"graph edge #{k + 1} joins {edge[0]!r} to itself")
        key = frozenset(edge)
        if key in seen:
            raise ConfigError(edges_doc.source, line, f"graph edge #{k + 1} {edge} repeats line {seen[key]}")
        seen[key] = line
        edges.append((edge[0], edge[1]))
        lines.append(line)
    return nodes, tuple(edges), lines


def _plazas(doc: SourceDict, names: dict[str, int]) -> dict[str, Plaza]:
    if "plazas" not in doc:
        return {}
    section = require(doc, "plazas", dict, "map")
    out = {}
    for name in section:
        _claim(names, name, section, "plazas")
        what = f"plaza {name!r}"
        entry = require(section, name, dict, "plazas")
        no_unknown(entry, ("rect", "polygon"), what)
        if ("rect" in entry) == ("polygon" in entry):
            raise entry.error(None, f"{what}: give exactly one of rect: [[x0, y0], [x1, y1]] or polygon: [[x, y], ...]")
        if "rect" in entry:
            corners = require(entry, "rect", list, what)
            if len(corners) != 2:
                raise entry.error("rect", f"{what}: rect must be two corners [[x0, y0], [x1, y1]]")
            (x0, y0), (x1, y1) = (_xy(c, entry.error("rect", ""), f"{what}: rect corner") for c in corners)
            if x0 == x1 or y0 == y1:
                raise entry.error("rect", f"{what}: rect has no area")
            xa, xb, ya, yb = min(x0, x1), max(x0, x1), min(y0, y1), max(y0, y1)
            polygon = ((xa, ya), (xb, ya), (xb, yb), (xa, yb))
        else:
            pts = require(entry, "polygon", list, what)
            polygon = tuple(_xy(p, entry.error("polygon", ""), f"{what}: polygon point") for p in pts)
            if len(polygon) < 3:
                raise entry.error("polygon", f"{what}: a polygon needs at least 3 points")
        out[name] = Plaza(name, polygon, entry.line)
    return out


def _check_edges(crowd_map: CrowdMap, lines: list[int], source: str) -> None:
    """A passage edge must not pass through a wall (zero clearance: edges may run close along one)."""
    if not crowd_map.edges or not crowd_map.walls:
        return
    segs = np.array([[*crowd_map.nodes[a], *crowd_map.nodes[b]] for a, b in crowd_map.edges])
    d = segment_distances(segs, crowd_map.wall_segments)
    blocked = d <= crowd_map.wall_half_thickness[None, :]
    for k in np.flatnonzero(blocked.any(axis=1)):
        wall = crowd_map.walls[int(np.flatnonzero(blocked[k])[0])]
        a, b = crowd_map.edges[k]
        label = f" {wall.name!r}" if wall.name else ""
        raise ConfigError(source, lines[k], f"graph edge [{a}, {b}] runs through wall{label} (line {wall.line})")


def _check_connected(crowd_map: CrowdMap, doc: SourceDict) -> None:
    """Every node and gate reachable from every other: else some entrance -> exit route would not exist."""
    names = list(crowd_map.nodes)
    if not names:
        return
    adjacency = crowd_map._adjacency  # noqa: SLF001 - same module
    reached = {0}
    stack = [0]
    while stack:
        k = stack.pop()
        for j, _ in adjacency[k]:
            if j not in reached:
                reached.add(j)
                stack.append(j)
    missing = [names[k] for k in range(len(names)) if k not in reached]
    if missing:
        raise doc.error("graph", f"graph: not connected; {', '.join(missing)} cannot be reached from {names[0]!r}")

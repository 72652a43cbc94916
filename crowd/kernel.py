"""The crowd's step, compiled: route following, forces, integration and contacts for every agent in one call.

Why compiled (numba, compiled on first use and cached on disk next to this file): at 100 agents the vectorised
numpy step spent almost all of its ~2 ms in the fixed cost of ~500 small array calls (a few microseconds each,
whatever the array size), not in arithmetic, while JuPedSim's C++ core steps the same crowd in 0.14 ms. Here the
per-agent and per-pair loops are plain loops compiled by numba, and the Python side makes one call per step
(crowd/sim.py). The first process after an install compiles (~15 s); later ones load the cache (~0.4 s).

Why one file: numba's on-disk cache is keyed on the source file of each compiled function only, not on the files of
the functions it calls, so a change to a callee in another module would leave a stale compiled caller behind.
Everything compiled lives here; crowd/forces.py and crowd/navigation.py document the models and keep the
Python-facing API (parameters, the wall grid, thin wrappers the tests call).

Nothing here is parallel and nothing uses fastmath: sums run in a fixed order, so the same inputs give the same
bits on every run (the crowd's determinism rests on it).

The step, for agents in row order:

1. route following (:func:`_follow`, crowd/navigation.py): a waypoint is passed when the next one is in sight
   with body clearance; a person who lost sight of the waypoint they walk to goes back to the latest one they see
   and is reported ``lost`` (the caller plans a new route from there);
2. desired velocity: the override where a hook set one, else v0 x speed_factor toward the point aimed at on the
   waypoint's gate, braking to stop on the goal;
3. neighbour pairs within the social cut-off (a cell list), and per pair: the social force, the headway (the free
   path to the nearest person ahead in one's lane, to where they will be after the anticipation time), group
   repulsion, contact candidates; the robot as someone to follow while it drives one's way;
4. the headway speed rule (crowd/forces.py): the desired speed is at most headway / time_gap;
5. forces: desired (relaxation), social, walls (steering only), groups, robot; semi-implicit Euler with the
   speed cap; while the headway rule binds, no velocity backwards along one's way;
6. contacts (:func:`_resolve`): what a physics engine does for the crowd when it runs on its own (the crowd-simulation
   reference lets the engine carry out intended motion where it is free and resolve it by mechanics where bodies
   interfere; in a trial the pybullet world does that): overlapping pairs pushed apart along their centre line,
   half each, a few Jacobi iterations; the robot and walls immovable (a body inside is put back on the surface,
   its velocity into it removed); a step whose displacement crosses a wall's centre line is undone, and so is a
   step along which the swept body goes more than 2 cm into a wall (no squeezing through a gap narrower than the
   body, no cutting round a wall's end);
7. gaze and arrivals.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

# Indices into the parameter vector P (crowd/forces.py: param_vector builds it from the merged params).
P_DESIRED_FACTOR = 0
P_TAU = 1
P_SOCIAL_FACTOR = 2
P_LAMBDA = 3
P_GAMMA = 4
P_N = 5
P_N_PRIME = 6
P_CUTOFF = 7
P_OBST_FACTOR = 8
P_OBST_SIGMA = 9
P_OBST_THRESHOLD = 10
P_COH_FACTOR = 11
P_GREP_FACTOR = 12
P_GREP_THRESHOLD = 13
P_GAZE_FACTOR = 14
P_GAZE_FOV = 15
P_ROBOT_FACTOR = 16
P_ROBOT_SIGMA = 17
P_ROBOT_THRESHOLD = 18
P_ROBOT_LAMBDA = 19
P_BRAKING = 20
P_SIGHT_MARGIN = 21
P_LOST_FRACTION = 22
P_TIME_GAP = 23
P_ITERATIONS = 24
P_MAX_SPEED_MULT = 25
P_ANTICIPATION = 26
N_PARAMS = 27

GOLDEN = math.pi * (3.0 - math.sqrt(5.0))
CONTACT_SLACK_M = 0.3  # how far a contact push may carry a body toward a wall within one step
WALL_TOLERANCE_M = 0.02  # a body left deeper than this in a wall after the iterations is put back where it was
SIGHT_EPS_M = 1e-6
CORNER_MERGE_M = 0.15  # closest points of two walls this near (and pushing the same way) are one corner
COS_45 = math.sqrt(0.5)
# Pairs with d / B above this feel less than exp(-7) = 0.09 % of the force at contact (5.1 x 9e-4 = 0.005 m/s^2
# with pysocialforce's factor): they are skipped before atan2 and exp, like the cut-off, a truncation.
SOCIAL_NEGLIGIBLE = 7.0
ROBOT_FOLLOW_MPS = 0.05  # a robot driving one's way at least this fast is followed like a person
GATE_APPROACH_M = 0.2  # within this of a gate's line the point aimed at slides to the waypoint itself

_HALF_STENCIL_X = (1, 1, 1, 0)
_HALF_STENCIL_Y = (-1, 0, 1, 1)


# --- geometry ----------------------------------------------------------------------------------------------------

@njit(cache=True)
def _point_segment(px, py, ax, ay, bx, by):
    dx, dy = bx - ax, by - ay
    length2 = max(dx * dx + dy * dy, 1e-18)
    t = ((px - ax) * dx + (py - ay) * dy) / length2
    t = min(max(t, 0.0), 1.0)
    cx, cy = px - (ax + t * dx), py - (ay + t * dy)
    return math.sqrt(cx * cx + cy * cy)


@njit(cache=True)
def _orient(ax, ay, bx, by, cx, cy):
    return (bx - ax) * (cy - ay) - (by - ay) * (cx - ax)


@njit(cache=True)
def _segment_distance(p0x, p0y, p1x, p1y, q0x, q0y, q1x, q1y):
    """Distance between segments p0-p1 and q0-q1 (0 when they cross or touch): maps.segment_distance, scalar."""
    d1 = _orient(q0x, q0y, q1x, q1y, p0x, p0y)
    d2 = _orient(q0x, q0y, q1x, q1y, p1x, p1y)
    d3 = _orient(p0x, p0y, p1x, p1y, q0x, q0y)
    d4 = _orient(p0x, p0y, p1x, p1y, q1x, q1y)
    if d1 * d2 <= 0 and d3 * d4 <= 0 and not (d1 == 0 and d2 == 0 and d3 == 0 and d4 == 0):
        return 0.0
    d = _point_segment(p0x, p0y, q0x, q0y, q1x, q1y)
    d = min(d, _point_segment(p1x, p1y, q0x, q0y, q1x, q1y))
    d = min(d, _point_segment(q0x, q0y, p0x, p0y, p1x, p1y))
    return min(d, _point_segment(q1x, q1y, p0x, p0y, p1x, p1y))


@njit(cache=True)
def _strictly_crosses(p0x, p0y, p1x, p1y, q0x, q0y, q1x, q1y):
    """The move p0 -> p1 goes from one side of the wall line q0-q1 strictly to the other, within the wall."""
    return (_orient(q0x, q0y, q1x, q1y, p0x, p0y) * _orient(q0x, q0y, q1x, q1y, p1x, p1y) < 0
            and _orient(p0x, p0y, p1x, p1y, q0x, q0y) * _orient(p0x, p0y, p1x, p1y, q1x, q1y) <= 0)


@njit(cache=True)
def _closest(px, py, seg, w):
    """(distance from wall w's closest point to p, unit normal from that point to p; the wall's left normal when p lies
    on its line)."""
    ax, ay, bx, by = seg[w, 0], seg[w, 1], seg[w, 2], seg[w, 3]
    dx, dy = bx - ax, by - ay
    t = ((px - ax) * dx + (py - ay) * dy) / (dx * dx + dy * dy)
    t = min(max(t, 0.0), 1.0)
    vx, vy = px - (ax + t * dx), py - (ay + t * dy)
    dist = math.sqrt(vx * vx + vy * vy)
    if dist > 1e-12:
        return dist, vx / dist, vy / dist
    length = math.sqrt(dx * dx + dy * dy)
    return dist, -dy / length, dx / length


@njit(cache=True)
def in_sight(px, py, qx, qy, clearance, seg, half):
    """True when a body can go straight from p to q: along the way it keeps ``clearance`` off every wall face,
    or, for a wall p or q is already closer to than that, no closer than p and q are (a person pressed against a
    wall may walk along it; a goal by a wall is reached)."""
    lox, hix = min(px, qx), max(px, qx)
    loy, hiy = min(py, qy), max(py, qy)
    for w in range(seg.shape[0]):
        reach = half[w] + clearance
        if (max(seg[w, 0], seg[w, 2]) < lox - reach or min(seg[w, 0], seg[w, 2]) > hix + reach
                or max(seg[w, 1], seg[w, 3]) < loy - reach or min(seg[w, 1], seg[w, 3]) > hiy + reach):
            continue
        gap = _segment_distance(px, py, qx, qy, seg[w, 0], seg[w, 1], seg[w, 2], seg[w, 3]) - half[w]
        if gap >= clearance:
            continue
        ends = min(_point_segment(px, py, seg[w, 0], seg[w, 1], seg[w, 2], seg[w, 3]),
                   _point_segment(qx, qy, seg[w, 0], seg[w, 1], seg[w, 2], seg[w, 3])) - half[w]
        if gap < min(clearance, ends) - SIGHT_EPS_M:
            return False
    return True


# --- neighbours --------------------------------------------------------------------------------------------------

@njit(cache=True)
def _cells(px, py, cutoff):
    """A uniform grid at least ``cutoff`` wide: (nx, ny, cell x, cell y, cell start offsets, agents by cell).

    Cells grow (x2) until the grid has at most ~4 cells per agent, so a few agents far apart never allocate a
    huge grid. Agents are listed by cell, in row order within a cell (a counting sort): the pair order is a
    function of the positions only."""
    n = px.shape[0]
    lox, loy, hix, hiy = px[0], py[0], px[0], py[0]
    for i in range(1, n):
        lox, hix = min(lox, px[i]), max(hix, px[i])
        loy, hiy = min(loy, py[i]), max(hiy, py[i])
    cell = cutoff
    while (math.floor((hix - lox) / cell) + 1) * (math.floor((hiy - loy) / cell) + 1) > 4 * n + 64:
        cell *= 2.0
    inv = 1.0 / cell
    cx = np.empty(n, np.int64)
    cy = np.empty(n, np.int64)
    nx, ny = 1, 1
    for i in range(n):
        cx[i] = int((px[i] - lox) * inv)
        cy[i] = int((py[i] - loy) * inv)
        nx, ny = max(nx, cx[i] + 1), max(ny, cy[i] + 1)
    start = np.zeros(nx * ny + 1, np.int64)
    for i in range(n):
        start[cx[i] * ny + cy[i] + 1] += 1
    for c in range(nx * ny):
        start[c + 1] += start[c]
    fill = start[:-1].copy()
    order = np.empty(n, np.int64)
    for i in range(n):
        key = cx[i] * ny + cy[i]
        order[fill[key]] = i
        fill[key] += 1
    return nx, ny, cx, cy, start, order


@njit(cache=True)
def _scan_range(i, lo, hi, order, px, py, c2, out_i, out_j, room, count):
    """Pairs of i with the agents order[lo:hi] closer than sqrt(c2): counted, written while there is room."""
    for t in range(lo, hi):
        j = order[t]
        dx, dy = px[i] - px[j], py[i] - py[j]
        if dx * dx + dy * dy < c2:
            if count < room:
                out_i[count], out_j[count] = i, j
            count += 1
    return count


@njit(cache=True)
def _scan_pairs(px, py, cutoff, out_i, out_j, room):
    """Count every unordered pair closer than ``cutoff``, once each, writing the first ``room`` of them."""
    n = px.shape[0]
    count = 0
    if n < 2:
        return count
    nx, ny, cx, cy, start, order = _cells(px, py, cutoff)
    c2 = cutoff * cutoff
    for s in range(n):
        i = order[s]
        key = cx[i] * ny + cy[i]
        count = _scan_range(i, s + 1, start[key + 1], order, px, py, c2, out_i, out_j, room, count)  # own cell
        for k in range(4):  # the whole of each half-stencil neighbour cell
            ox, oy = cx[i] + _HALF_STENCIL_X[k], cy[i] + _HALF_STENCIL_Y[k]
            if ox < 0 or ox >= nx or oy < 0 or oy >= ny:
                continue
            other = ox * ny + oy
            count = _scan_range(i, start[other], start[other + 1], order, px, py, c2, out_i, out_j, room, count)
    return count


@njit(cache=True)
def neighbour_pairs(px, py, cutoff):
    """Every unordered pair (i, j) closer than ``cutoff`` through the cell list: O(N + candidate pairs).

    One pass into room for 16 pairs per agent; only a crowd denser than that scans again, counting first."""
    n = px.shape[0]
    room = 16 * n + 16
    out_i = np.empty(room, np.int64)
    out_j = np.empty(room, np.int64)
    count = _scan_pairs(px, py, cutoff, out_i, out_j, room)
    if count > room:
        out_i = np.empty(count, np.int64)
        out_j = np.empty(count, np.int64)
        _scan_pairs(px, py, cutoff, out_i, out_j, count)
    return out_i[:count], out_j[:count]


# --- forces ------------------------------------------------------------------------------------------------------

@njit(cache=True)
def _social_pair(ex, ey, d, dvx, dvy, lam, gamma, n_, n_prime, negligible):
    """Moussaid et al. 2009 on i from j (forces.py documents it): e unit from j to i at distance d, dv = v_j - v_i.
    Returns the force per unit factor; the force on j is its negative. Where d / B exceeds ``negligible`` both
    terms are below exp(-negligible) and the pair is skipped before the costly part (inf: never)."""
    tx, ty = lam * dvx + ex, lam * dvy + ey
    t_len = math.sqrt(tx * tx + ty * ty)
    if d > negligible * gamma * t_len:
        return 0.0, 0.0
    inv = 1.0 / max(t_len, 1e-9)
    tx, ty = tx * inv, ty * inv
    theta = math.atan2(ex * ty - ey * tx, ex * tx + ey * ty)
    b = max(gamma * t_len, 1e-9)
    base = -d / b
    bt2 = (b * theta) ** 2
    fv = math.exp(base - n_prime * n_prime * bt2)
    fa = math.exp(base - n_ * n_ * bt2)
    if theta > 0:
        fa = -fa
    elif theta == 0:
        fa = 0.0
    return fv * tx - fa * ty, fv * ty + fa * tx


@njit(cache=True)
def social_force_pairs(pos, vel, pi, pj, factor, lam, gamma, n_, n_prime):
    """The social force on every agent from the pairs (pi, pj): antisymmetric, each pair evaluated once."""
    n = pos.shape[0]
    out = np.zeros((n, 2))
    for k in range(pi.shape[0]):
        i, j = pi[k], pj[k]
        ex, ey = pos[i, 0] - pos[j, 0], pos[i, 1] - pos[j, 1]
        d = math.sqrt(ex * ex + ey * ey)
        inv = 1.0 / max(d, 1e-9)
        fx, fy = _social_pair(ex * inv, ey * inv, d, vel[j, 0] - vel[i, 0], vel[j, 1] - vel[i, 1], lam, gamma,
                              n_, n_prime, np.inf)
        out[i, 0] += factor * fx
        out[i, 1] += factor * fy
        out[j, 0] -= factor * fx
        out[j, 1] -= factor * fy
    return out


@njit(cache=True)
def _free_path(ahead, lateral, contact):
    """How far one can walk straight on before touching a person ``ahead`` along the way and ``lateral`` off it,
    bodies touching at centre distance ``contact``: inf when that person is behind or out of one's lane."""
    lateral = abs(lateral)
    if ahead <= 0 or lateral >= contact:
        return np.inf
    return ahead - math.sqrt(contact * contact - lateral * lateral)


# --- route following ---------------------------------------------------------------------------------------------

@njit(cache=True)
def _set_target(i, k, route_xy, route_len, waypoint, target, final):
    waypoint[i] = k
    target[i, 0], target[i, 1] = route_xy[i, k, 0], route_xy[i, k, 1]
    final[i] = k == route_len[i] - 1


@njit(cache=True)
def _follow(i, pos, radius, route_xy, route_len, waypoint, target, final, seg, half, margin, lost_fraction):
    """Pass waypoints that the next one's sight makes unnecessary; when the current one is out of sight, go back
    to the latest earlier one in sight. Returns True when the current waypoint was out of sight: the caller
    plans a new route from here (the step back is what the agent walks to until then)."""
    px, py, r = pos[i, 0], pos[i, 1], radius[i]
    k = waypoint[i]
    last = route_len[i] - 1
    lost_clear = lost_fraction * r
    lost = False
    if not in_sight(px, py, route_xy[i, k, 0], route_xy[i, k, 1], lost_clear, seg, half):
        lost = True
        back = k - 1
        while back >= 0 and not in_sight(px, py, route_xy[i, back, 0], route_xy[i, back, 1], lost_clear, seg, half):
            back -= 1
        if back >= 0:
            k = back
    while k < last and in_sight(px, py, route_xy[i, k + 1, 0], route_xy[i, k + 1, 1], r + margin, seg, half):
        k += 1
    if k != waypoint[i]:
        _set_target(i, k, route_xy, route_len, waypoint, target, final)
    return lost


@njit(cache=True)
def _aim(i, pos, radius, waypoint, target, route_gate, margin):
    """The point the agent walks to for its current waypoint: on the waypoint's gate (the line across the passage
    through it, navigation.py), the nearest point its body passes with ``margin`` off the walls; the waypoint
    itself when it has no gate."""
    k = waypoint[i]
    gx, gy, w_minus, w_plus = route_gate[i, k, 0], route_gate[i, k, 1], route_gate[i, k, 2], route_gate[i, k, 3]
    tx, ty = target[i, 0], target[i, 1]
    if w_minus + w_plus <= 0.0:
        return tx, ty
    keep = radius[i] + margin
    lo, hi = -(w_minus - keep), w_plus - keep
    if lo > hi:  # narrower than the body and its margins: its middle
        return tx + 0.5 * (w_plus - w_minus) * gx, ty + 0.5 * (w_plus - w_minus) * gy
    # the gate narrows to its waypoint as the agent comes up to it: on the gate line it aims at the waypoint,
    # from which the next one is in sight (else it would stand on the line, aiming at itself)
    rx, ry = pos[i, 0] - tx, pos[i, 1] - ty
    narrow = min(abs(rx * gy - ry * gx) / GATE_APPROACH_M, 1.0)
    along = min(max(rx * gx + ry * gy, lo * narrow), hi * narrow)
    return tx + along * gx, ty + along * gy


@njit(cache=True)
def _route_velocity(i, pos, radius, v0, speed_factor, has_route, waypoint, target, final, route_gate, braking,
                    margin):
    """(vx, vy, unit x, unit y): v0 x speed_factor toward the current waypoint's aim point, at most
    sqrt(2 braking distance) on the last leg (navigation.desired_velocities documents why)."""
    if not has_route[i]:
        return 0.0, 0.0, 0.0, 0.0
    ax, ay = _aim(i, pos, radius, waypoint, target, route_gate, margin)
    rx, ry = ax - pos[i, 0], ay - pos[i, 1]
    dist = math.sqrt(rx * rx + ry * ry)
    if dist <= 1e-9:
        return 0.0, 0.0, 0.0, 0.0
    ux, uy = rx / dist, ry / dist
    speed = v0[i] * speed_factor[i]
    if final[i]:
        speed = min(speed, math.sqrt(2.0 * braking * dist))
    return ux * speed, uy * speed, ux, uy


@njit(cache=True)
def route_velocities(pos, radius, v0, speed_factor, has_route, waypoint, target, final, route_gate, braking,
                     margin):
    """Every agent's route velocity and unit direction (navigation.desired_velocities)."""
    n = pos.shape[0]
    vel = np.zeros((n, 2))
    unit = np.zeros((n, 2))
    for i in range(n):
        vel[i, 0], vel[i, 1], unit[i, 0], unit[i, 1] = _route_velocity(
            i, pos, radius, v0, speed_factor, has_route, waypoint, target, final, route_gate, braking, margin)
    return vel, unit


@njit(cache=True)
def _ray_capsule(px, py, dx, dy, ax, ay, bx, by, h):
    """Smallest t >= 0 at which p + t d (d a unit vector) comes within h of segment a-b (inf: never)."""
    ex, ey = bx - ax, by - ay
    length = math.sqrt(ex * ex + ey * ey)
    best = np.inf
    if _point_segment(px, py, ax, ay, bx, by) <= h:
        return 0.0
    if length > 1e-12:
        ux, uy = ex / length, ey / length
        nx_, ny_ = -uy, ux
        dn = dx * nx_ + dy * ny_
        if abs(dn) > 1e-12:
            for side in (-h, h):  # the two long sides of the capsule
                t = (side - ((px - ax) * nx_ + (py - ay) * ny_)) / dn
                if t >= 0:
                    along = (px + t * dx - ax) * ux + (py + t * dy - ay) * uy
                    if 0 <= along <= length:
                        best = min(best, t)
    for cx, cy in ((ax, ay), (bx, by)):  # the round ends
        fx, fy = px - cx, py - cy
        b = fx * dx + fy * dy
        c = fx * fx + fy * fy - h * h
        disc = b * b - c
        if disc >= 0:
            t = -b - math.sqrt(disc)
            if t >= 0:
                best = min(best, t)
    return best


@njit(cache=True)
def free_reach(px, py, dx, dy, seg, half, max_t):
    """How far one can go from p along the unit direction d before meeting a wall's body (at most max_t)."""
    best = max_t
    for w in range(seg.shape[0]):
        best = min(best, _ray_capsule(px, py, dx, dy, seg[w, 0], seg[w, 1], seg[w, 2], seg[w, 3], half[w]))
    return best


# --- walls -------------------------------------------------------------------------------------------------------

@njit(cache=True)
def _wall_cell(px, py, origin, cell, nx, ny):
    cx = int(math.floor((px - origin[0]) / cell))
    cy = int(math.floor((py - origin[1]) / cell))
    if cx < 0 or cx >= nx or cy < 0 or cy >= ny:
        return -1
    return cx * ny + cy


@njit(cache=True)
def _obstacle_force(pos, radius, seg, half, origin, cell, nx, ny, cell_start, cell_walls, factor, sigma,
                    threshold, force):
    """factor exp(-gap / sigma) along the normal from each wall's closest point, for gap < threshold.

    Walls that meet (a polygon's edges, a door jamb drawn as three segments) share their end points: from beyond
    the corner, each of them has its closest point there, and summing them would push with two or three walls'
    worth from one corner (enough to hold a person in front of a 1 m door). A wall whose closest point lies
    within CORNER_MERGE_M of a nearer wall's, pushing within 45 degrees of the same way, is that corner again and
    is skipped; the two walls of an inside corner push at right angles and both count."""
    kmax = 1
    for i in range(pos.shape[0]):
        key = _wall_cell(pos[i, 0], pos[i, 1], origin, cell, nx, ny)
        if key >= 0:
            kmax = max(kmax, cell_start[key + 1] - cell_start[key])
    dist_k = np.empty(kmax)
    nx_k = np.empty(kmax)
    ny_k = np.empty(kmax)
    gap_k = np.empty(kmax)
    for i in range(pos.shape[0]):
        key = _wall_cell(pos[i, 0], pos[i, 1], origin, cell, nx, ny)
        if key < 0:
            continue
        m = 0
        for s in range(cell_start[key], cell_start[key + 1]):
            w = cell_walls[s]
            dist, nxw, nyw = _closest(pos[i, 0], pos[i, 1], seg, w)
            gap = dist - half[w] - radius[i]
            if gap >= threshold:
                continue
            # insertion by distance (a handful of walls per agent)
            k = m
            while k > 0 and dist_k[k - 1] > dist:
                dist_k[k], nx_k[k], ny_k[k], gap_k[k] = dist_k[k - 1], nx_k[k - 1], ny_k[k - 1], gap_k[k - 1]
                k -= 1
            dist_k[k], nx_k[k], ny_k[k], gap_k[k] = dist, nxw, nyw, gap
            m += 1
        for k in range(m):
            # closest point of wall k: the agent minus dist x normal
            cxk, cyk = pos[i, 0] - dist_k[k] * nx_k[k], pos[i, 1] - dist_k[k] * ny_k[k]
            same = False
            for q in range(k):
                cxq, cyq = pos[i, 0] - dist_k[q] * nx_k[q], pos[i, 1] - dist_k[q] * ny_k[q]
                if ((cxk - cxq) ** 2 + (cyk - cyq) ** 2 < CORNER_MERGE_M ** 2
                        and nx_k[k] * nx_k[q] + ny_k[k] * ny_k[q] > COS_45):
                    same = True
                    break
            if same:
                continue
            mag = factor * math.exp(-gap_k[k] / sigma)
            force[i, 0] += mag * nx_k[k]
            force[i, 1] += mag * ny_k[k]


# --- contacts (the module docstring, step 6) ---------------------------------------------------------------------

@njit(cache=True)
def _wall_candidates(old, pos, radius, seg, half, origin, cell, nx, ny, cell_start, cell_walls):
    """(agent, wall) pairs a body may touch this step: within radius + slack + its step of the wall."""
    n = pos.shape[0]
    total = 0
    for i in range(n):
        key = _wall_cell(pos[i, 0], pos[i, 1], origin, cell, nx, ny)
        if key >= 0:
            total += cell_start[key + 1] - cell_start[key]
    ca = np.empty(total, np.int64)
    cw = np.empty(total, np.int64)
    m = 0
    for i in range(n):
        key = _wall_cell(pos[i, 0], pos[i, 1], origin, cell, nx, ny)
        if key < 0:
            continue
        sx, sy = pos[i, 0] - old[i, 0], pos[i, 1] - old[i, 1]
        step = math.sqrt(sx * sx + sy * sy)
        for s in range(cell_start[key], cell_start[key + 1]):
            w = cell_walls[s]
            dist, _, _ = _closest(pos[i, 0], pos[i, 1], seg, w)
            if dist < half[w] + radius[i] + CONTACT_SLACK_M + step:
                ca[m], cw[m] = i, w
                m += 1
    return ca[:m], cw[:m]


@njit(cache=True)
def _undo_crossings(old, pos, vel, ca, cw, seg):
    n = pos.shape[0]
    crossed = np.zeros(n, np.bool_)
    for k in range(ca.shape[0]):
        i, w = ca[k], cw[k]
        if _strictly_crosses(old[i, 0], old[i, 1], pos[i, 0], pos[i, 1], seg[w, 0], seg[w, 1], seg[w, 2], seg[w, 3]):
            crossed[i] = True
    for i in range(n):
        if crossed[i]:
            pos[i, 0], pos[i, 1] = old[i, 0], old[i, 1]
            vel[i, 0], vel[i, 1] = 0.0, 0.0


@njit(cache=True)
def _separate(pos, radius, ci, cj):
    """One Jacobi iteration: overlapping candidate pairs pushed apart along their centre line, half each."""
    n = pos.shape[0]
    push = np.zeros((n, 2))
    any_hit = False
    for k in range(ci.shape[0]):
        i, j = ci[k], cj[k]
        dx, dy = pos[i, 0] - pos[j, 0], pos[i, 1] - pos[j, 1]
        d = math.sqrt(dx * dx + dy * dy)
        overlap = radius[i] + radius[j] - d
        if overlap <= 0:
            continue
        any_hit = True
        if d > 1e-9:
            ux, uy = dx / d, dy / d
        else:  # the same point: split along a direction that depends on the pair only
            ang = GOLDEN * (i + 2 * j + 1)
            ux, uy = math.cos(ang), math.sin(ang)
        px_, py_ = 0.5 * overlap * ux, 0.5 * overlap * uy
        push[i, 0] += px_
        push[i, 1] += py_
        push[j, 0] -= px_
        push[j, 1] -= py_
    if any_hit:
        for i in range(n):
            pos[i, 0] += push[i, 0]
            pos[i, 1] += push[i, 1]


@njit(cache=True)
def _keep_off_robot(pos, vel, radius, rx, ry, rr):
    for i in range(pos.shape[0]):
        dx, dy = pos[i, 0] - rx, pos[i, 1] - ry
        dist = math.sqrt(dx * dx + dy * dy)
        if dist >= radius[i] + rr:
            continue
        if dist > 1e-9:
            ux, uy = dx / dist, dy / dist
        else:
            ux, uy = 1.0, 0.0
        pos[i, 0], pos[i, 1] = rx + ux * (radius[i] + rr), ry + uy * (radius[i] + rr)
        vn = vel[i, 0] * ux + vel[i, 1] * uy
        if vn < 0:
            vel[i, 0] -= vn * ux
            vel[i, 1] -= vn * uy


@njit(cache=True)
def _push_off_walls(pos, vel, radius, ca, cw, seg, half):
    """Bodies inside a wall's thickness back onto its face, inward velocity removed (Jacobi over the pairs)."""
    n = pos.shape[0]
    dp = np.zeros((n, 2))
    dv = np.zeros((n, 2))
    hit = False
    for k in range(ca.shape[0]):
        i, w = ca[k], cw[k]
        dist, ux, uy = _closest(pos[i, 0], pos[i, 1], seg, w)
        pen = half[w] + radius[i] - dist
        if pen <= 0:
            continue
        hit = True
        dp[i, 0] += pen * ux
        dp[i, 1] += pen * uy
        vn = min(vel[i, 0] * ux + vel[i, 1] * uy, 0.0)
        dv[i, 0] += vn * ux
        dv[i, 1] += vn * uy
    if hit:
        for i in range(n):
            pos[i, 0] += dp[i, 0]
            pos[i, 1] += dp[i, 1]
            vel[i, 0] -= dv[i, 0]
            vel[i, 1] -= dv[i, 1]


@njit(cache=True)
def _resolve(old, pos, vel, radius, ci, cj, seg, half, origin, cell, nx, ny, cell_start, cell_walls,
             robot, iterations):
    ca, cw = _wall_candidates(old, pos, radius, seg, half, origin, cell, nx, ny, cell_start, cell_walls)
    if ca.shape[0]:
        _undo_crossings(old, pos, vel, ca, cw, seg)
    for _ in range(max(iterations, 1)):
        if iterations > 0:
            _separate(pos, radius, ci, cj)
        if robot[0] > 0:
            _keep_off_robot(pos, vel, radius, robot[1], robot[2], robot[3])
        if ca.shape[0]:
            _push_off_walls(pos, vel, radius, ca, cw, seg, half)
    if ca.shape[0]:
        # The swept body must not have gone deeper into a wall than the tolerance (and than it started).
        back = np.zeros(pos.shape[0], np.bool_)
        for k in range(ca.shape[0]):
            i, w = ca[k], cw[k]
            reach = half[w] + radius[i]
            swept = _segment_distance(old[i, 0], old[i, 1], pos[i, 0], pos[i, 1],
                                      seg[w, 0], seg[w, 1], seg[w, 2], seg[w, 3]) - reach
            start = _closest(old[i, 0], old[i, 1], seg, w)[0] - reach
            if swept < -WALL_TOLERANCE_M and swept < start - 1e-9:
                back[i] = True
        for i in range(pos.shape[0]):
            if back[i]:
                pos[i, 0], pos[i, 1] = old[i, 0], old[i, 1]
                vel[i, 0], vel[i, 1] = 0.0, 0.0
        _undo_crossings(old, pos, vel, ca, cw, seg)


# --- groups and the robot ----------------------------------------------------------------------------------------

@njit(cache=True)
def _group_forces(pos, dirs, gidx, n_groups, coh_factor, gaze_factor, fov_deg, force):
    """Moussaid 2010 coherence and gaze (forces.py documents them); gidx: dense group index or -1."""
    size = np.zeros(n_groups)
    sx = np.zeros(n_groups)
    sy = np.zeros(n_groups)
    for i in range(pos.shape[0]):
        g = gidx[i]
        if g >= 0:
            size[g] += 1.0
            sx[g] += pos[i, 0]
            sy[g] += pos[i, 1]
    for i in range(pos.shape[0]):
        g = gidx[i]
        if g < 0:
            continue
        sz = size[g]
        tx, ty = sx[g] / sz - pos[i, 0], sy[g] / sz - pos[i, 1]
        dist = math.sqrt(tx * tx + ty * ty)
        if dist >= (sz - 1) / 2 and dist > 1e-12:
            force[i, 0] += coh_factor * tx / dist
            force[i, 1] += coh_factor * ty / dist
        if sz > 1:
            ox = (sx[g] - pos[i, 0]) / (sz - 1) - pos[i, 0]
            oy = (sy[g] - pos[i, 1]) / (sz - 1) - pos[i, 1]
            rel = math.sqrt(ox * ox + oy * oy)
            if rel > 1e-12:
                cosang = min(max((dirs[i, 0] * ox + dirs[i, 1] * oy) / rel, -1.0), 1.0)
                angle = math.degrees(math.acos(cosang))
                if angle > fov_deg:
                    rot = math.radians(angle - fov_deg)
                    force[i, 0] -= gaze_factor * rot * dirs[i, 0]
                    force[i, 1] -= gaze_factor * rot * dirs[i, 1]


@njit(cache=True)
def _robot_force(pos, radius, dirs, robot, applies, factor, sigma, threshold, lam, force):
    rx, ry, rr = robot[1], robot[2], robot[3]
    for i in range(pos.shape[0]):
        if not applies[i]:
            continue
        dx, dy = pos[i, 0] - rx, pos[i, 1] - ry
        dist = math.sqrt(dx * dx + dy * dy)
        gap = dist - radius[i] - rr
        if gap >= threshold or dist <= 1e-12:
            continue
        ux, uy = dx / dist, dy / dist
        cos_phi = -(dirs[i, 0] * ux + dirs[i, 1] * uy)
        w = lam + (1.0 - lam) * (1.0 + cos_phi) / 2.0
        mag = factor * math.exp(-gap / sigma) * w
        force[i, 0] += mag * ux
        force[i, 1] += mag * uy


# --- the step ----------------------------------------------------------------------------------------------------

@njit(cache=True)
def step(pos, vel, radius, v0, speed_factor, gidx, n_groups, gaze,
         has_route, route_xy, route_len, route_gate, waypoint, target, final, goal_radius, robot_target,
         exit_on_arrival, override_v, override_g,
         seg, half, w_origin, w_cell, w_nx, w_ny, w_start, w_walls, w_reach,
         robot, P, dt):
    """One step for every agent (the module docstring lists what happens in order).

    Writes ``waypoint``, ``target``, ``final`` and ``gaze`` in place; returns (new positions, new velocities,
    lost: agents that lost sight of their waypoint, leaving: on their goal within its radius and to leave there,
    how many of each, 0.0). ``robot`` is [present (1/0), x, y, radius]; ``P`` the parameter vector (P_* indices). When the wall
    buckets (built for ``w_reach`` m) do not reach as far as this step needs, nothing is done and the last value
    is the reach needed: the caller rebuilds them and steps again."""
    n = pos.shape[0]
    lost = np.zeros(n, np.bool_)
    r_max, v_max, h_max = 0.0, 0.0, 0.0
    for i in range(n):
        r_max = max(r_max, radius[i])
        v_max = max(v_max, v0[i] * speed_factor[i])
    for w in range(half.shape[0]):
        h_max = max(h_max, half[w])
    needed = max(P[P_OBST_THRESHOLD], CONTACT_SLACK_M + 2 * dt * P[P_MAX_SPEED_MULT] * v_max) + r_max + h_max
    if needed > w_reach:
        return pos.copy(), vel.copy(), lost, np.zeros(n, np.bool_), 0, 0, needed
    px, py = pos[:, 0].copy(), pos[:, 1].copy()
    for i in range(n):
        if has_route[i] and route_len[i] > 0:
            lost[i] = _follow(i, pos, radius, route_xy, route_len, waypoint, target, final, seg, half,
                              P[P_SIGHT_MARGIN], P[P_LOST_FRACTION])

    # desired velocity and direction; the speed cap
    vdes = np.zeros((n, 2))
    dirs = np.zeros((n, 2))
    overridden = np.zeros(n, np.bool_)
    cap = np.empty(n)
    cap_max = 0.0
    for i in range(n):
        ox, oy = override_v[i, 0], override_v[i, 1]
        if not (math.isnan(ox) or math.isnan(oy)):
            overridden[i] = True
            vdes[i, 0], vdes[i, 1] = ox, oy
            s = math.sqrt(ox * ox + oy * oy)
            if s > 1e-9:
                dirs[i, 0], dirs[i, 1] = ox / s, oy / s
        else:
            vdes[i, 0], vdes[i, 1], dirs[i, 0], dirs[i, 1] = _route_velocity(
                i, pos, radius, v0, speed_factor, has_route, waypoint, target, final, route_gate, P[P_BRAKING],
                P[P_SIGHT_MARGIN])
        wanted = max(math.sqrt(vdes[i, 0] ** 2 + vdes[i, 1] ** 2), v0[i] * speed_factor[i])
        cap[i] = P[P_MAX_SPEED_MULT] * wanted
        cap_max = max(cap_max, cap[i])

    # pairs: social force, headway, group repulsion, contact candidates
    pi, pj = neighbour_pairs(px, py, P[P_CUTOFF])
    force = np.zeros((n, 2))
    headway = np.full(n, np.inf)
    contact = np.zeros(pi.shape[0], np.bool_)
    lam, gamma, n_, n_prime = P[P_LAMBDA], P[P_GAMMA], P[P_N], P[P_N_PRIME]
    sfac, gfac, gthr2 = P[P_SOCIAL_FACTOR], P[P_GREP_FACTOR], P[P_GREP_THRESHOLD] ** 2
    n_contact = 0
    anticipation = P[P_ANTICIPATION]
    for k in range(pi.shape[0]):
        i, j = pi[k], pj[k]
        ex, ey = px[i] - px[j], py[i] - py[j]
        d = math.sqrt(ex * ex + ey * ey)
        inv = 1.0 / max(d, 1e-9)
        fx, fy = _social_pair(ex * inv, ey * inv, d, vel[j, 0] - vel[i, 0], vel[j, 1] - vel[i, 1], lam, gamma,
                              n_, n_prime, SOCIAL_NEGLIGIBLE)
        force[i, 0] += sfac * fx
        force[i, 1] += sfac * fy
        force[j, 0] -= sfac * fx
        force[j, 1] -= sfac * fy
        # headway: j ahead of i in i's lane (e points from j to i, so j lies at -e), measured to where j will be
        # after the anticipation time; only people not walking against one count (people coming the other way
        # are avoided by the social force, not followed), and not one's own group (its forces keep the spacing:
        # a companion stepping back to wait must not stop the other one)
        same_group = gidx[i] >= 0 and gidx[i] == gidx[j]
        if not same_group and dirs[i, 0] * dirs[j, 0] + dirs[i, 1] * dirs[j, 1] >= 0:
            contact_d = radius[i] + radius[j]
            gap = _free_path(-(ex * dirs[i, 0] + ey * dirs[i, 1]), ex * dirs[i, 1] - ey * dirs[i, 0], contact_d)
            gap += anticipation * max(vel[j, 0] * dirs[i, 0] + vel[j, 1] * dirs[i, 1], 0.0)
            headway[i] = min(headway[i], gap)
            gap = _free_path(ex * dirs[j, 0] + ey * dirs[j, 1], ex * dirs[j, 1] - ey * dirs[j, 0], contact_d)
            gap += anticipation * max(vel[i, 0] * dirs[j, 0] + vel[i, 1] * dirs[j, 1], 0.0)
            headway[j] = min(headway[j], gap)
        if gidx[i] >= 0 and gidx[i] == gidx[j] and d * d <= gthr2:
            force[i, 0] += gfac * ex
            force[i, 1] += gfac * ey
            force[j, 0] -= gfac * ex
            force[j, 1] -= gfac * ey
        reach = radius[i] + radius[j] + 2 * dt * cap_max
        if d < reach:
            contact[k] = True
            n_contact += 1

    # a robot driving one's way is someone to follow too (else people catch it up from behind and bump into it),
    # for those the robot force acts on (a person walking up to it, or steered by an objective, has decided how
    # to treat it); one standing or coming the other way is gone round by the robot force. Behind the robot the
    # rule also caps the velocity itself (below): nobody pushes a robot along as a crowd pushes its queue
    time_gap = P[P_TIME_GAP]
    robot_limit = np.full(n, np.inf)
    if robot[0] > 0 and time_gap > 0:
        for i in range(n):
            if overridden[i] or robot_target[i] or robot[4] * dirs[i, 0] + robot[5] * dirs[i, 1] < ROBOT_FOLLOW_MPS:
                continue
            rx, ry = robot[1] - px[i], robot[2] - py[i]
            gap = _free_path(rx * dirs[i, 0] + ry * dirs[i, 1], rx * dirs[i, 1] - ry * dirs[i, 0],
                             radius[i] + robot[3])
            gap += anticipation * max(robot[4] * dirs[i, 0] + robot[5] * dirs[i, 1], 0.0)
            headway[i] = min(headway[i], gap)
            robot_limit[i] = max(gap, 0.0) / time_gap

    # the headway speed rule on the desired velocity, then the desired force
    limit = np.empty(n)
    queued = np.zeros(n, np.bool_)
    for i in range(n):
        limit[i] = max(headway[i], 0.0) / time_gap if time_gap > 0 else np.inf
        s = math.sqrt(vdes[i, 0] ** 2 + vdes[i, 1] ** 2)
        if s > limit[i]:
            queued[i] = True
            scale = limit[i] / s
            vdes[i, 0] *= scale
            vdes[i, 1] *= scale
    dfac = P[P_DESIRED_FACTOR] / P[P_TAU]
    for i in range(n):
        force[i, 0] += dfac * (vdes[i, 0] - vel[i, 0])
        force[i, 1] += dfac * (vdes[i, 1] - vel[i, 1])
    # walls steer, they do not hold people back: the part of the wall force against the desired direction is
    # dropped (the contact handling still keeps bodies out of walls), as walls only turn the direction of motion
    # in the collision-free speed model; else the jambs of a 1 m door hold the crowd half a metre off it
    wall = np.zeros((n, 2))
    _obstacle_force(pos, radius, seg, half, w_origin, w_cell, w_nx, w_ny, w_start, w_walls,
                    P[P_OBST_FACTOR], P[P_OBST_SIGMA], P[P_OBST_THRESHOLD], wall)
    for i in range(n):
        wx, wy = wall[i, 0], wall[i, 1]
        back = wx * dirs[i, 0] + wy * dirs[i, 1]
        if back < 0:
            wx -= back * dirs[i, 0]
            wy -= back * dirs[i, 1]
        force[i, 0] += wx
        force[i, 1] += wy
    if n_groups > 0:
        _group_forces(pos, dirs, gidx, n_groups, P[P_COH_FACTOR], P[P_GAZE_FACTOR], P[P_GAZE_FOV], force)
    if robot[0] > 0:
        applies = ~overridden & ~robot_target
        _robot_force(pos, radius, dirs, robot, applies, P[P_ROBOT_FACTOR], P[P_ROBOT_SIGMA],
                     P[P_ROBOT_THRESHOLD], P[P_ROBOT_LAMBDA], force)

    # semi-implicit Euler and the speed cap; while following someone (the headway rule binds) the pushes of the
    # crowd ahead do not walk a person backwards (a queue does not flow back), though the crowd behind may push
    # them on faster than they would walk
    new_vel = np.empty((n, 2))
    new_pos = np.empty((n, 2))
    for i in range(n):
        vx, vy = vel[i, 0] + dt * force[i, 0], vel[i, 1] + dt * force[i, 1]
        speed = math.sqrt(vx * vx + vy * vy)
        if speed > cap[i]:
            vx, vy = vx * cap[i] / speed, vy * cap[i] / speed
        along = vx * dirs[i, 0] + vy * dirs[i, 1]
        if along > robot_limit[i]:
            vx -= (along - robot_limit[i]) * dirs[i, 0]
            vy -= (along - robot_limit[i]) * dirs[i, 1]
        elif queued[i] and along < 0:
            vx -= along * dirs[i, 0]
            vy -= along * dirs[i, 1]
        new_vel[i, 0], new_vel[i, 1] = vx, vy
        new_pos[i, 0], new_pos[i, 1] = pos[i, 0] + dt * vx, pos[i, 1] + dt * vy

    ci = np.empty(n_contact, np.int64)
    cj = np.empty(n_contact, np.int64)
    m = 0
    for k in range(pi.shape[0]):
        if contact[k]:
            ci[m], cj[m] = pi[k], pj[k]
            m += 1
    _resolve(pos, new_pos, new_vel, radius, ci, cj, seg, half, w_origin, w_cell, w_nx, w_ny, w_start, w_walls,
             robot, int(P[P_ITERATIONS]))

    # gaze: the walking direction (kept while standing), or the override where a hook set one; who leaves
    leaving = np.zeros(n, np.bool_)
    n_lost, n_leaving = 0, 0
    for i in range(n):
        vx, vy = new_vel[i, 0], new_vel[i, 1]
        speed = math.sqrt(vx * vx + vy * vy)
        if speed > 0.05:
            gaze[i, 0], gaze[i, 1] = vx / speed, vy / speed
        gx, gy = override_g[i, 0], override_g[i, 1]
        if not (math.isnan(gx) or math.isnan(gy)):
            norm = math.sqrt(gx * gx + gy * gy)
            if norm > 1e-9:
                gaze[i, 0], gaze[i, 1] = gx / norm, gy / norm
        if has_route[i] and final[i] and exit_on_arrival[i]:
            dx, dy = target[i, 0] - new_pos[i, 0], target[i, 1] - new_pos[i, 1]
            leaving[i] = math.sqrt(dx * dx + dy * dy) <= goal_radius[i]
            n_leaving += leaving[i]
        n_lost += lost[i]
    return new_pos, new_vel, lost, leaving, n_lost, n_leaving, 0.0

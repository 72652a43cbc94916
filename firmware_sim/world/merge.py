"""What does not move is one body: the robot's bodies grouped into the pybullet links the world builds.

Most bodies of a robot built from parts hang on fixed joints (the commbot: 59 bodies, 19 moving joints; every
mount between two parts is fixed, and so are a servo's housing, a bracket, a head's shell). A fixed joint costs
pybullet a link of its multibody all the same (Featherstone's algorithm over 59 links instead of 20), so the
world builds each chain of bodies joined by fixed joints as one link: a *group*. Its mass, centre of mass and
inertia are the members' combined exactly through the fixed transforms (``devices.spatial.Inertia``, the sums
runtime.model's kinematic tree uses for the same merge), its collision and visual shapes are every member's, each
at its pose in the group's frame, and each member keeps its own frame (``offset``, its frame in the group's).

A fixed child joins its parent's group unless that would change what the physics does or what pybullet can take:
- its contact friction differs from the group's (pybullet's friction is per link, not per shape): the commbot's
  chassis has 0.01 for its sliding caster while the bumper and the torso keep the default, so they stay links of
  their own, joined by fixed joints as before;
- its surface (what range sensors see, devices/surfaces.py) differs from the group's: a ray's result names the
  link it hit, so a link is one surface;
- the group would hold more than ``MAX_SHAPES`` collision or visual shapes: pybullet's createCollisionShapeArray
  and createVisualShapeArray keep at most 16 shapes and silently drop the rest (measured, pybullet 3.2.7), so a
  fuller group starts a new one at that child.
Either way the result is the same rigid body as before (a fixed joint's two links move as one), only cheaper.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from hil.devices.descriptor import Joint
from hil.devices.spatial import SE3, Inertia

from .frames import IDENTITY, Frame, compose, rotation_matrix
from .tree import LinkSpec, depth_first

MAX_SHAPES = 16  # pybullet's shape arrays keep this many shapes (MAX_COMPOUND_COLLISION_SHAPES) and drop the rest


@dataclass(frozen=True)
class LinkGroup:
    """One pybullet link: ``members`` index the body specs (``members[0]`` is the body its joint carries),
    ``offsets[i]`` is member i's frame in the group's (the first member's) frame; ``parent`` indexes the groups
    (-1 for the base); ``joint`` (None for the base and for a fixed mount) sits at ``joint_frame`` in the parent
    group's frame; ``inertia`` is the members' combined, in the group's frame."""

    members: tuple[int, ...]
    offsets: tuple[Frame, ...]
    parent: int
    joint: Joint | None
    joint_frame: Frame
    inertia: Inertia


def group_links(specs: list[LinkSpec], merge_fixed: bool = True,
                friction: Mapping[tuple[int, str], float] | None = None) -> list[LinkGroup]:
    """The links to build, in pybullet's numbering (depth-first, see tree.depth_first). ``merge_fixed`` False
    gives one group per body (the world as it was built before merging)."""
    friction = friction or {}
    group_of: list[int] = []  # spec index -> index into `drafts`
    drafts: list[dict] = []
    for k, spec in enumerate(specs):
        parent_group = group_of[spec.parent] if k else None
        if parent_group is not None and merge_fixed and _joins(spec, drafts[parent_group], friction):
            draft = drafts[parent_group]
            offset = compose(draft["offsets"][draft["members"].index(spec.parent)], spec.joint_frame)
            draft["members"].append(k)
            draft["offsets"].append(offset)
            draft["collisions"] += len(spec.body.collisions)
            draft["visuals"] += len(spec.body.visuals)
            group_of.append(parent_group)
            continue
        if parent_group is None:
            parent, frame = -1, IDENTITY
        else:
            up = drafts[parent_group]
            parent = parent_group
            frame = _in_group(up["offsets"][up["members"].index(spec.parent)], spec.joint_frame)
        drafts.append({"members": [k], "offsets": [IDENTITY], "parent": parent, "joint": spec.joint,
                       "joint_frame": frame, "friction": friction.get((spec.part_id, spec.body.name)),
                       "surface": spec.body.surface,
                       "collisions": len(spec.body.collisions), "visuals": len(spec.body.visuals)})
        group_of.append(len(drafts) - 1)
    groups = [LinkGroup(tuple(d["members"]), tuple(d["offsets"]), d["parent"], d["joint"], d["joint_frame"],
                        composite_inertia(specs, d["members"], d["offsets"])) for d in drafts]
    return depth_first(groups)


def _joins(spec: LinkSpec, group: dict, friction: Mapping[tuple[int, str], float]) -> bool:
    fixed = spec.joint is None or spec.joint.type == "fixed"
    return (fixed and friction.get((spec.part_id, spec.body.name)) == group["friction"]
            and spec.body.surface == group["surface"]
            and group["collisions"] + len(spec.body.collisions) <= MAX_SHAPES
            and group["visuals"] + len(spec.body.visuals) <= MAX_SHAPES)


def _in_group(offset: Frame, frame: Frame) -> Frame:
    """``frame`` (given in a member's frame) in its group's frame; exact when the member is the group's frame."""
    return frame if offset == IDENTITY else compose(offset, frame)


def body_inertia(spec: LinkSpec) -> Inertia:
    inertial = spec.body.inertial
    return Inertia(inertial.mass, np.asarray(inertial.com, dtype=float), np.asarray(inertial.inertia, dtype=float))


def se3(frame: Frame) -> SE3:
    return SE3(rotation_matrix(frame[1]), np.asarray(frame[0], dtype=float))


def composite_inertia(specs: list[LinkSpec], members: list[int] | tuple[int, ...],
                      offsets: list[Frame] | tuple[Frame, ...]) -> Inertia:
    """The members' inertias combined in the group's frame (parallel-axis theorem, runtime.model's Inertia sum).
    A group of one body keeps that body's numbers untouched (no rounding: merge_fixed=False builds as before)."""
    total = None
    for k, offset in zip(members, offsets):
        own = body_inertia(specs[k])
        placed = own if offset == IDENTITY else own.transformed(se3(offset))
        total = placed if total is None else total + placed
    return total

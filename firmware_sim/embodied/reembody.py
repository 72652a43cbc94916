"""A part swapped on a running world gets the physics of the part now there.

:func:`firmware_sim.hotplug.swap` puts another part's firmware at a bus ID; this module (the device's swap hook,
installed by :func:`~firmware_sim.embodied.embody`) makes the world follow, under the device's lock, between two
steps:

- the old firmware stops acting on the world: a world-backed servo or wheel leaves the robot's position drives
  and the wheels the bumper stops, and its joint is released to its friction;
- the joint the old part moved takes the new part's joint limits (position range where both are limited,
  effort, velocity), damping and friction, under the new joint's name; the new part, if it is a servo or a wheel,
  gets world-backed firmware driving that joint, so a weaker servo holds a load less well and a slower wheel
  turns slower, as on the bench;
- the links carrying the old part's bodies take the new part's mass: each of the old bodies' masses scaled by
  new total / old total (the link inertias by the same change of the link's mass), so the robot's total mass is
  the one its parts' descriptors add up to.

Departure: the old part's shapes stay (pybullet cannot change a multibody's links or shapes in place, and
rebuilding the robot mid-run would drop every sensor's and the crowd's handle on it): a swapped part has the old
one's geometry and joint axis with the new one's limits, torque and mass. A joint of another pybullet type
(prismatic for revolute) keeps the old limits; a new part without a servo (a camera for a hand) leaves its
joint released; sensor parts swapped in are served by their plain firmware (a camera renders where the old
shapes have its camera's body: embodied/camera.py ``follow_swap``). ``RobotBody.parts`` keeps the old descriptor:
it names the shapes the links carry, which the cameras draw.
"""
from __future__ import annotations

from dataclasses import replace

import pybullet as p

from ..part import PartFirmware
from ..servo import ServoFirmware
from ..world.builder import JOINT_TYPES, LIMITED, RobotJoint
from .adopt import adopt
from .camera import follow_swap as follow_cameras
from .servo import JointServo


def install(embodied) -> None:
    """Make ``embodied``'s device call :func:`reembody_swapped` on every swap."""
    embodied.device.swap_hooks.append(lambda old, new: reembody_swapped(embodied, old, new))


def reembody_swapped(embodied, old: PartFirmware, new: PartFirmware) -> PartFirmware:
    """The firmware to serve at ``new.id`` in ``embodied``'s world (``new`` itself unless it is a servo or wheel
    given a world joint); the world changed to the new part's limits and masses. Call under the device's lock."""
    robot, part_id = embodied.robot, new.id
    desc = getattr(new, "descriptor", None)
    follow_cameras(embodied, new)
    if part_id not in robot.parts or desc is None:
        return new
    _detach(embodied, old)
    _set_mass(robot, part_id, sum(b.inertial.mass for b in desc.bodies))
    joints = [j for j in robot.moving_joints if j.part_id == part_id]
    moving = desc.moving_joints
    served: PartFirmware = new
    if joints and len(moving) == 1:
        joint = _retune(robot, joints[0], moving[0])
        if isinstance(new, ServoFirmware) and moving[0].registers and "present_position" in moving[0].registers:
            served = adopt(JointServo, new).attach(embodied.world, robot, joint, embodied.watchdog_s,
                                                   embodied.interlock)
            if desc.kind == "wheel":
                wheels = _wheels(embodied)
                if wheels is not None:
                    wheels.append(served)
    embodied.parts = tuple(served if part.id == part_id else part for part in embodied.parts)
    return served


def _detach(embodied, old: PartFirmware) -> None:
    """The old firmware no longer drives anything; its joints go limp (their friction only)."""
    robot = embodied.robot
    if isinstance(old, JointServo):
        old.detach()
        wheels = _wheels(embodied)
        if wheels is not None and old in wheels:
            wheels.remove(old)
    for joint in robot.moving_joints:
        if joint.part_id == old.id:
            robot.release(joint)


def _wheels(embodied) -> list | None:
    """The list of wheels the contact sensors stop (one list shared by all of them, made in embody)."""
    for part in embodied.parts:
        wheels = getattr(part, "wheels", None)
        if isinstance(wheels, list):
            return wheels
    return None


def _retune(robot, joint: RobotJoint, new_joint) -> RobotJoint:
    """``joint`` (a pybullet joint) with the new part's joint's name, limits, damping and friction."""
    same_kind = JOINT_TYPES[new_joint.type] == JOINT_TYPES[joint.type]
    limits = new_joint.limits
    if not (same_kind and (new_joint.type in LIMITED) == (joint.type in LIMITED)):
        limits = replace(joint.limits, effort=limits.effort, velocity=limits.velocity)  # keep the old range
    tuned = replace(joint, name=new_joint.name, type=joint.type if not same_kind else new_joint.type, limits=limits,
                    damping=new_joint.damping, friction=new_joint.friction, actuated=bool(new_joint.registers))
    c, body = robot.client, robot.body_id
    if tuned.type in LIMITED and limits.lower is not None and limits.upper is not None:
        p.changeDynamics(body, joint.index, jointLowerLimit=limits.lower, jointUpperLimit=limits.upper,
                         physicsClientId=c)
    p.changeDynamics(body, joint.index, jointDamping=tuned.damping, physicsClientId=c)
    robot.replace_joint(joint, tuned)
    robot.release(tuned)
    return tuned


def _set_mass(robot, part_id: int, new_total: float) -> None:
    """Scale the masses of ``part_id``'s bodies to ``new_total`` (kg), link by link in pybullet."""
    bodies = [link for link in robot.links if link.part_id == part_id]
    old_total = sum(link.mass for link in bodies)
    if not bodies or old_total <= 0.0:
        return
    k = new_total / old_total
    c, body = robot.client, robot.body_id
    for index in sorted({link.index for link in bodies}):
        mass, _, inertia = p.getDynamicsInfo(body, index, physicsClientId=c)[:3]
        own = sum(link.mass for link in bodies if link.index == index)
        new_mass = mass - own + k * own
        if mass > 0.0 and new_mass > 0.0:
            ratio = new_mass / mass
            p.changeDynamics(body, index, mass=new_mass, localInertiaDiagonal=[v * ratio for v in inertia],
                             physicsClientId=c)
    robot.relink(tuple(replace(link, mass=link.mass * k) if link.part_id == part_id else link
                       for link in robot.links))

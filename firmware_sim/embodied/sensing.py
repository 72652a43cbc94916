"""Sensor firmware: the range ring and the contact sensors, measuring in the world after each physics step.

The numbers come from each part's descriptor (its Sensor params) through firmware_sim.sensors; each part has its
own seeded generator. The ring measures at its update rate and holds its last readings between updates; the
contact sensors measure after every step, and one that stops the wheels (param ``stops_wheels``: the bumper)
trips the interlock in the same post-step hook, so the wheels are stopped before the next step.
"""
from __future__ import annotations


from ..part import PartFirmware
from ..sensors import ContactSensorModel, RangeRingModel
from ..world import RobotBody, World
from .servo import Interlock, JointServo


class RangeRingFirmware(PartFirmware):
    def attach(self, world: World, robot: RobotBody, seed: int) -> "RangeRingFirmware":
        sensor = next(s for s in self.descriptor.sensors if s.kind == "range_ring")
        self.model = RangeRingModel(sensor, seed)
        self.robot, self.sensor_body = robot, sensor.body
        self.period_steps = max(1, round(self.model.config.update_period_s / world.time_step_s))
        self.last_reading = None
        world.add_post_step(self._post_step)
        return self

    def _post_step(self, world: World) -> None:
        if (world.steps - 1) % self.period_steps:
            return
        position, orientation = self.robot.link_pose(self.id, self.sensor_body)
        reading = self.model.measure(self.robot.client, position, orientation, surfaces=world.surfaces)
        self.last_reading = reading
        config, memory = self.model.config, self.memory
        for name, raw in zip(config.registers or (), reading.raw):
            memory.set(name, raw)
        for cause, register in (config.invalid_counters or {}).items():
            memory.set(register, self.model.counters[cause] & 0xFFFFFFFF)


class ContactFirmware(PartFirmware):
    def attach(self, world: World, robot: RobotBody, interlock: Interlock,
               wheels: list[JointServo]) -> "ContactFirmware":
        self.robot, self.interlock, self.wheels = robot, interlock, wheels
        self.sensors = []
        for sensor in self.descriptor.sensors:
            if sensor.kind != "contact":
                continue
            model = ContactSensorModel(sensor)
            collisions = self.descriptor.body(sensor.body).collisions
            model.check_collisions(collisions)
            self.sensors.append((sensor, model, collisions, bool(sensor.params.get("stops_wheels", False))))
        self._bodies = frozenset((self.id, s[0].body) for s in self.sensors)
        self._links = frozenset(robot.link_index(self.id, s[0].body) for s in self.sensors)  # where they sit
        self._stops_wheels = any(s[3] for s in self.sensors)
        self._quiet = False  # the registers read 0 and nothing touched the sensors last step
        world.add_post_step(self._post_step)
        return self

    def _post_step(self, world: World) -> None:
        # one contact query per step for all the robot's parts; nothing on the links the sensors sit on (the wheels
        # meet the floor, the sensors nothing: most steps) needs no attribution of the points to bodies
        quiet = self._quiet and not (self._stops_wheels and self.interlock.pressed)
        if quiet and self._links.isdisjoint(self.robot.touched_links()):
            return  # nothing touches, nothing was pressed: every register already reads 0
        if quiet and self._bodies.isdisjoint(self.robot.touched()):  # one attribution per step for all parts
            return
        by_register: dict[str, int] = {}
        pressed = False
        robot = self.robot
        for sensor, model, collisions, stops_wheels in self.sensors:
            contacts = robot.body_contacts(self.id, sensor.body)  # the step's one query, attributed per body
            if not contacts:
                mask = 0  # nothing touches: skip the frame computation (the common case, every step)
            else:
                forces = model.forces_of(contacts, collisions, robot.link_pose(self.id, sensor.body))
                mask = model.mask_of(forces)
            register = sensor.params["register"]
            by_register[register] = by_register.get(register, 0) | mask
            pressed |= stops_wheels and mask != 0
        for register, mask in by_register.items():
            self.memory.set(register, mask)
        self._quiet = not any(by_register.values())
        if any(s[3] for s in self.sensors):
            if pressed and not self.interlock.pressed:
                self.interlock.trips += 1
                for wheel in self.wheels:
                    wheel.stop_now()
            self.interlock.pressed = pressed


def part_seed(base_seed: int, serial_number: int) -> int:
    """One seed per part, from the world's seed and the part's serial: the same part draws the same numbers."""
    return (base_seed * 0x9E3779B97F4A7C15 + serial_number) % (1 << 63) or 1


__all__ = ["RangeRingFirmware", "ContactFirmware", "part_seed"]

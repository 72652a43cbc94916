"""The robots the model tests share, built as VirtualRobot objects straight from descriptors (the way the bus
scan builds them; tests/test_model.py checks that a scanned bus gives the same model):

- CHAIN: catalog cpc_servo parts, each on the previous one's horn, with test-only brackets that turn the next
  part by 90 degrees and branch the tree, a test-only part with prismatic, continuous and fixed joints and
  off-diagonal inertias, and a plain XM430-W350 servo (no CPC block, descriptor from the catalog) as a leaf;
- SERIAL: an unbranched arm of catalog parts (five servos turned every way by L- and J-brackets, upper arm,
  forearm, hand): six joints in a row, the deepest tree of moving joints per part;
- the commbot: config/robots/commbot.yaml through firmware_sim.assembly, read the way the scan reads it (each
  part's descriptor and the port table in its CPC block).
"""
from __future__ import annotations

import math

import numpy as np

from hil.devices.catalog import load_part, plain_servo
from hil.devices.control_table.cpc import MAX_PORTS, NO_PART, PORT_TABLE_ADDRESS
from hil.devices.descriptor import descriptor_from_dict
from hil.firmware_sim.assembly import load_assembly
from hil.runtime.model import Model
from hil.runtime.scan import ScannedPart, VirtualRobot

BRACKET = descriptor_from_dict({
    "schema": 1, "name": "test_bracket", "kind": "bracket",
    "bodies": [{"name": "plate", "mass": 0.021, "com": [0.004, -0.002, 0.011],
                "inertia": {"ixx": 2.1e-6, "iyy": 1.7e-6, "izz": 1.4e-6, "ixy": 2.0e-7, "ixz": -1.5e-7, "iyz": 1.0e-7},
                "visuals": [{"box": [0.03, 0.03, 0.02], "xyz": [0, 0, 0.01]}],
                "collisions": [{"box": [0.03, 0.03, 0.02], "xyz": [0, 0, 0.01], "rpy": [0.1, 0.2, 0.3]}]}],
    "ports": [{"name": "mount", "body": "plate", "parent": True, "xyz": [0.001, 0.0, -0.002], "rpy": [0, 0, 0.2]},
              {"name": "out", "body": "plate", "xyz": [0.0, 0.012, 0.02], "rpy": [math.pi / 2, 0, 0]},
              {"name": "side", "body": "plate", "xyz": [0.015, 0.0, 0.01], "rpy": [0, math.pi / 2, 0]}],
})

TETRA = {"vertices": [[0, 0, 0], [0.01, 0, 0], [0, 0.01, 0], [0, 0, 0.01]],
         "triangles": [[0, 1, 2], [0, 1, 3], [0, 2, 3], [1, 2, 3]]}

SLIDER = descriptor_from_dict({
    "schema": 1, "name": "test_slider", "kind": "link",
    "bodies": [
        {"name": "rail", "mass": 0.05, "com": [0.02, 0, 0.005], "inertia": {"ixx": 4e-6, "iyy": 9e-6, "izz": 1.1e-5},
         "collisions": [{"cylinder": [0.005, 0.04], "xyz": [0.02, 0, 0.005], "rpy": [0, math.pi / 2, 0]}]},
        {"name": "carriage", "mass": 0.03, "com": [0, 0.001, 0.004],
         "inertia": {"ixx": 3e-6, "iyy": 2.5e-6, "izz": 2e-6, "ixy": -1e-7, "ixz": 5e-8, "iyz": 2e-7},
         "visuals": [{"sphere": [0.008]}], "collisions": [{"sphere": [0.008]}, {"box": [0.01, 0.01, 0.004]}]},
        {"name": "tip", "mass": 0.01, "com": [0.003, 0, 0], "inertia": {"ixx": 5e-7, "iyy": 6e-7, "izz": 7e-7},
         "collisions": [{"capsule": [0.003, 0.01]}]},
        {"name": "roller", "mass": 0.008, "com": [0, 0, 0], "inertia": {"ixx": 3e-7, "iyy": 5e-7, "izz": 3e-7},
         "visuals": [{"mesh": TETRA}], "collisions": [{"mesh": TETRA}]},
    ],
    "joints": [
        {"name": "slide", "type": "prismatic", "parent": "rail", "child": "carriage", "xyz": [0.01, 0, 0.01],
         "rpy": [0.1, 0, 0], "axis": [1, 1, 0],
         "limits": {"lower": -0.02, "upper": 0.03, "effort": 20, "velocity": 0.5}},
        {"name": "tip_fix", "type": "fixed", "parent": "carriage", "child": "tip", "xyz": [0, 0, 0.012],
         "rpy": [0.3, -0.4, 1.1]},
        {"name": "roll", "type": "continuous", "parent": "carriage", "child": "roller", "xyz": [0, -0.01, 0],
         "axis": [0, 1, 0], "limits": {"effort": 1, "velocity": 10}},
    ],
    "ports": [{"name": "mount", "body": "rail", "parent": True},
              {"name": "end", "body": "tip", "xyz": [0.006, 0, 0], "rpy": [0, math.pi / 2, 0]}],
})

# (bus ID, descriptor, parent ID, parent's port, self-describing); parents before children
CHAIN = [
    (1, "cpc_servo", None, None, True),
    (2, BRACKET, 1, "horn", True),
    (3, "cpc_servo", 2, "out", True),  # turned 90 degrees by the bracket
    (4, "cpc_servo", 3, "horn", True),
    (5, BRACKET, 4, "horn", True),
    (6, SLIDER, 5, "out", True),
    (7, "cpc_servo", 6, "end", True),
    (8, "XM430-W350", 7, "horn", False),  # plain servo: descriptor from the catalog
    (9, "cpc_servo", 2, "side", True),  # a branch
    (10, "cpc_servo", 9, "horn", True),
]


# an arm in a row: shoulder servos turned by L- and J-brackets, upper arm, elbow, forearm, opening hand
SERIAL = [
    (1, "cpc_servo", None, None, True),
    (2, "bracket_l", 1, "horn", True),
    (3, "cpc_servo", 2, "mount", True),
    (4, "bracket_j", 3, "horn", True),
    (5, "cpc_servo", 4, "mount", True),
    (6, "bracket_l", 5, "horn", True),
    (7, "cpc_servo", 6, "mount", True),
    (8, "upper_arm", 7, "horn", True),
    (9, "cpc_servo", 8, "elbow", True),
    (10, "forearm", 9, "horn", True),
    (11, "hand", 10, "hand", True),
]


def _descriptor(spec):
    """A part spec of CHAIN/SERIAL (catalog name, \"XM430-W350\" or a descriptor) as its descriptor."""
    if spec == "XM430-W350":
        return plain_servo(1020)
    return load_part(spec) if isinstance(spec, str) else spec


def virtual_robot(entries, bus_url: str = "test://chain") -> VirtualRobot:
    """A VirtualRobot as the scan would build it: parent links, port names, children tables."""
    children: dict[int, dict[str, int]] = {}
    for bus_id, _, parent, port, _ in entries:
        if parent is not None:
            children.setdefault(parent, {})[port] = bus_id
    parts = {}
    for bus_id, spec, parent, port, self_describing in entries:
        desc = _descriptor(spec)
        parts[bus_id] = ScannedPart(bus_id, desc.model_number, 46, desc, "ab" * 32 if self_describing else "",
                                    1000 + bus_id if self_describing else None, self_describing, parent, port,
                                    children.get(bus_id, {}))
    root = next(bus_id for bus_id, _, parent, _, _ in entries if parent is None)
    return VirtualRobot(bus_url, parts, root)


def assembly_robot(name: str) -> VirtualRobot:
    """The VirtualRobot of a firmware_sim assembly, read as the scan reads it: each part's descriptor (the
    catalog's for a plain servo) and the port table its CPC block stores at 0x1032."""
    parts = {fw.id: fw for fw in load_assembly(name).parts}
    descriptors = {i: getattr(fw, "descriptor", None) or plain_servo(fw.model_number) for i, fw in parts.items()}
    children: dict[int, dict[str, int]] = {}
    for i, fw in parts.items():
        if getattr(fw, "descriptor", None) is not None:
            table = fw.memory.data[PORT_TABLE_ADDRESS:PORT_TABLE_ADDRESS + MAX_PORTS]
            children[i] = {port.name: table[k] for k, port in enumerate(descriptors[i].ports) if table[k] != NO_PART}
    parent_of = {child: (i, port) for i, table in children.items() for port, child in table.items()}
    scanned = {i: ScannedPart(i, fw.model_number, fw.firmware_version, descriptors[i], "",
                              fw.serial_number if i in children else None, i in children,
                              *parent_of.get(i, (None, None)), children.get(i, {})) for i, fw in parts.items()}
    roots = [i for i in parts if i not in parent_of]
    assert len(roots) == 1, f"{name}: parts hanging from nothing: {roots}"
    return VirtualRobot(f"sim://{name}", scanned, roots[0])


def random_state(model: Model, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    q = []
    for joint in model.moving_joints:
        lo, hi = (joint.limits.lower, joint.limits.upper) if joint.type != "continuous" else (-2 * math.pi, 2 * math.pi)
        q.append(rng.uniform(lo, hi))
    return np.array(q), rng.uniform(-3.0, 3.0, model.nq), rng.uniform(-10.0, 10.0, model.nq)


"""The fast dynamics (runtime.model.algorithms) against Pinocchio and against our own reference implementation.

Pinocchio (the ``pin`` package, in the test extra) gets the same model from runtime.model.pinocchio_model, built
from the descriptors (no URDF), and must agree on 50 seeded states of the commbot, of an unbranched arm (SERIAL)
and of the branched test chain (prismatic, continuous and fixed joints), within 1e-9 in every entry: forward
kinematics of every link, centre of mass, frame Jacobians in the three reference frames, RNEA, gravity
torques, CRBA and ABA. Measured: 5e-15 or less for everything except ABA (2e-11: accelerations of the eyes'
6e-5 kg m^2 links). The reference implementation (per link, the modular-robot reference's mass matrix from RNEA columns)
is slow, so it is checked on a few states only. tests/test_model.py checks the same functions against pybullet.

When ``CI`` is set, a missing Pinocchio fails these tests instead of skipping them.
"""
from __future__ import annotations

import math

import numpy as np
import pytest

from model_helpers import CHAIN, SERIAL, assembly_robot, random_state, virtual_robot
from waiting import needs
from hil.runtime.model import (LOCAL, LOCAL_WORLD_ALIGNED, SE3, WORLD, ModelError, build_model, center_of_mass,
                           composite_inertia, create_data, forward_dynamics, forward_kinematics, frame_jacobian,
                           gravity_torques, mass_matrix, rnea, total_mass)
from hil.runtime.model import reference
from hil.runtime.model.pinocchio_model import center_of_mass as pin_center_of_mass
from hil.runtime.model.pinocchio_model import to_pinocchio
from hil.runtime.scan import VirtualRobot

GRAVITY = (0.0, 0.0, -9.80665)
ATOL = 1e-9
N_STATES = 50
ROBOTS = {"commbot": lambda: assembly_robot("commbot"), "serial": lambda: virtual_robot(SERIAL, "test://serial"),
          "chain": lambda: virtual_robot(CHAIN)}


def pinocchio():
    try:
        import pinocchio as pin
    except ImportError as exc:
        needs(f"Pinocchio is needed for these tests (pip install -e '.[test]'): {exc}")
    return pin


@pytest.fixture(scope="module", params=sorted(ROBOTS))
def model(request):
    return build_model(ROBOTS[request.param]())


def test_the_tree_merges_every_rigid_subtree_and_keeps_the_mass():
    model = build_model(assembly_robot("commbot"))
    tree = model.tree
    assert (len(model.links), model.nq, len(tree.mass)) == (59, 19, 20)  # 59 links -> 20 bodies
    assert tree.mass.sum() == pytest.approx(total_mass(model), rel=1e-14)
    assert sorted(np.concatenate([level.joints for level in tree.levels]).tolist()) == list(range(19))
    assert len(tree.levels) == 5  # wheels/shoulders/neck, ..., hands and eye tilts
    for depth, level in enumerate(tree.levels):
        for joint, parent in zip(level.joints, level.parents):
            assert (parent == -1) == (depth == 0)
            assert parent < joint
    arm = model.q_index(10, "horn")  # left shoulder pitch carries roll, yaw, elbow, hand
    assert tree.ancestors[:, arm].sum() == 5
    assert model.tree is model.tree  # computed once


def test_every_algorithm_agrees_with_pinocchio_on_50_seeded_states(model):
    pin = pinocchio()
    pm = to_pinocchio(model, GRAVITY)
    pd = pm.createData()
    assert (pm.nq, pm.nv) == (model.nq, model.nq)
    assert [pm.names[k + 1] for k in range(model.nq)] == list(model.joint_names)
    data = create_data(model)
    frames = [pm.getFrameId(link.name, pin.BODY) for link in model.links]
    rng = np.random.default_rng(16)
    worst: dict[str, float] = {}

    def check(what: str, ours, theirs) -> None:
        error = float(np.abs(np.asarray(ours) - np.asarray(theirs)).max())
        worst[what] = max(worst.get(what, 0.0), error)
        assert error < ATOL, f"{model.name} {what}: {error:.2e}"

    for n in range(N_STATES):
        q, qd, qdd = random_state(model, rng)
        forward_kinematics(model, data, q)
        pin.framesForwardKinematics(pm, pd, q)
        for i in range(len(model.links)):
            check("placement", data.link_placement[i], pd.oMf[frames[i]].homogeneous)
        check("com", center_of_mass(model, data, q), pin_center_of_mass(model, pm, pd, q))
        link = n % len(model.links)
        for ours, theirs in ((WORLD, pin.WORLD), (LOCAL, pin.LOCAL), (LOCAL_WORLD_ALIGNED, pin.LOCAL_WORLD_ALIGNED)):
            check(f"jacobian {ours}", frame_jacobian(model, data, q, link, ours),
                  pin.computeFrameJacobian(pm, pd, q, frames[link], theirs))
        tau = rnea(model, data, q, qd, qdd, GRAVITY)
        check("rnea", tau, pin.rnea(pm, pd, q, qd, qdd))
        check("gravity", gravity_torques(model, data, q, GRAVITY), pin.computeGeneralizedGravity(pm, pd, q))
        check("crba", mass_matrix(model, data, q), pin.crba(pm, pd, q, pin.Convention.WORLD))
        check("aba", forward_dynamics(model, data, q, qd, tau, GRAVITY), pin.aba(pm, pd, q, qd, tau))
    print(model.name, ", ".join(f"{k} {v:.1e}" for k, v in worst.items()))
    assert np.abs(tau).max() > 0.01  # not comparing zeros


def test_fast_algorithms_agree_with_the_reference_implementation(model):
    """The per-link reference (the modular-robot reference's methods) on a few states: it takes ~1 s per commbot mass
    matrix."""
    data, ref = create_data(model), reference.ReferenceData.for_model(model)
    rng = np.random.default_rng(2)
    states = 1 if model.nq > 10 else 3
    for _ in range(states):
        q, qd, qdd = random_state(model, rng)
        forward_kinematics(model, data, q)
        reference.forward_kinematics(model, ref, q)
        for i in range(len(model.links)):
            assert data.oMi[i].isclose(ref.oMi[i], atol=1e-12)
            assert data.liMi[i].isclose(ref.liMi[i], atol=1e-12)
        ours, theirs = composite_inertia(model, data, q), reference.composite_inertia(model, ref, q)
        np.testing.assert_allclose(ours.com, theirs.com, rtol=0, atol=1e-12)
        np.testing.assert_allclose(ours.inertia, theirs.inertia, rtol=0, atol=1e-12)
        tau = rnea(model, data, q, qd, qdd, GRAVITY)
        np.testing.assert_allclose(tau, reference.rnea(model, ref, q, qd, qdd, GRAVITY), rtol=0, atol=ATOL)
        np.testing.assert_allclose(gravity_torques(model, data, q), reference.gravity_torques(model, ref, q),
                                   rtol=0, atol=ATOL)
        if model.nq <= 10:  # the reference's mass matrix and forward dynamics are nq RNEA calls each
            np.testing.assert_allclose(mass_matrix(model, data, q), reference.mass_matrix(model, ref, q), rtol=0,
                                       atol=1e-12)
            np.testing.assert_allclose(forward_dynamics(model, data, q, qd, tau, GRAVITY),
                                       reference.forward_dynamics(model, ref, q, qd, tau, GRAVITY), rtol=1e-9,
                                       atol=1e-9)


def test_jacobian_gives_the_velocity_of_the_link_by_finite_differences():
    """An independent check of the convention: J q_dot in local_world_aligned is the velocity of the link's
    origin and its angular velocity, as numerical differentiation of forward kinematics finds them."""
    model = build_model(virtual_robot(SERIAL, "test://serial"))
    data = create_data(model)
    rng = np.random.default_rng(4)
    q, qd, _ = random_state(model, rng)
    link = model.link_index("hand_11_finger")
    twist = frame_jacobian(model, data, q, "hand_11_finger") @ qd
    h = 1e-6
    before = forward_kinematics(model, data, q - h * qd)[link]
    after = forward_kinematics(model, data, q + h * qd)[link]
    np.testing.assert_allclose(twist[:3], (after.translation - before.translation) / (2 * h), atol=1e-6)
    spin = (after.rotation - before.rotation) / (2 * h) @ forward_kinematics(model, data, q)[link].rotation.T
    np.testing.assert_allclose(twist[3:], [spin[2, 1], spin[0, 2], spin[1, 0]], atol=1e-6)
    np.testing.assert_allclose(frame_jacobian(model, data, None, link, WORLD)[3:], frame_jacobian(
        model, data, None, link, LOCAL_WORLD_ALIGNED)[3:], atol=0)  # q None: the last configuration


def test_data_placements_are_se3_views_of_the_arrays():
    model = build_model(virtual_robot(CHAIN))
    data = create_data(model)
    placements = forward_kinematics(model, data, np.full(model.nq, 0.3))
    assert len(placements) == len(model.links) and isinstance(placements[-1], SE3)
    assert placements[-1].isclose(placements[len(model.links) - 1], atol=0)
    assert [p.translation.tolist() for p in placements[1:3]] == [placements[1].translation.tolist(),
                                                                 placements[2].translation.tolist()]
    link = model.links[-1]
    assert (placements[link.parent] * data.liMi[len(model.links) - 1]).isclose(placements[-1], atol=1e-14)
    forward_kinematics(model, data, np.zeros(model.nq))
    assert placements[-1].isclose(data.oMi[-1], atol=0)  # a view: it follows the latest configuration


def test_bad_input_is_refused_with_what_and_where():
    model = build_model(virtual_robot(CHAIN))
    data = create_data(model)
    with pytest.raises(ValueError, match=r"qd has 3 values; the model has nq = 9 \(cpc_servo_1_horn"):
        rnea(model, data, np.zeros(9), [0, 0, 0], None)
    with pytest.raises(ValueError, match="reference must be one of"):
        frame_jacobian(model, data, None, 0, "global")
    with pytest.raises(KeyError, match="no link 'nose'"):
        frame_jacobian(model, data, None, "nose")
    with pytest.raises(IndexError, match="link 25 out of range: the model has 20 links"):
        frame_jacobian(model, data, None, 25)


def test_a_robot_without_moving_joints_has_empty_dynamics_and_its_own_com():
    one = virtual_robot([(1, "bracket_l", None, None, True)], "test://bracket")
    model = build_model(VirtualRobot(one.bus_url, one.parts, 1))
    data = create_data(model)
    assert model.nq == 0
    assert rnea(model, data, [], [], []).shape == (0,) and mass_matrix(model, data, []).shape == (0, 0)
    assert forward_dynamics(model, data, [], [], []).shape == (0,)
    np.testing.assert_allclose(center_of_mass(model, data, []), model.links[0].inertia.com, atol=1e-15)
    assert frame_jacobian(model, data, [], 0).shape == (6, 0)


def test_pinocchio_model_has_the_links_as_frames_and_the_limits():
    pin = pinocchio()
    model = build_model(virtual_robot(CHAIN))
    pm = to_pinocchio(model)
    names = {pm.frames[i].name for i in range(pm.nframes) if pm.frames[i].type == pin.BODY}
    assert names >= {link.name for link in model.links}
    slide = model.joint("test_slider_6_slide")
    assert pm.lowerPositionLimit[slide.idx_q] == slide.limits.lower
    roll = model.joint("test_slider_6_roll")  # continuous: a revolute joint without limits
    assert math.isinf(pm.upperPositionLimit[roll.idx_q])
    np.testing.assert_allclose(pm.gravity.linear, GRAVITY)


def test_without_pinocchio_the_error_says_how_to_install_it(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_pinocchio(name, *args, **kwargs):
        if name == "pinocchio":
            raise ImportError("No module named 'pinocchio'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pinocchio)
    with pytest.raises(ModelError, match="pip install pin"):
        to_pinocchio(build_model(virtual_robot(CHAIN)))

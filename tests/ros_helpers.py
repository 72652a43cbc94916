"""What the ROS 2 tests share: ROS's Python (HIL_ROS_PYTHON or the checkout's .venv-ros, which ``make test``
builds from the ``ros`` extra) and a ROS_DOMAIN_ID of each test's own on localhost. Without ROS's Python the
tests that need it skip on a developer's machine and fail under CI. Import the fixtures into a test module:
``from ros_helpers import ros_env, ros_python  # noqa: F401``."""
from __future__ import annotations

import itertools
import os

import pytest

from hil.trial.ros_link.launch import PYTHON_ENV, checkout_venv, works


@pytest.fixture(scope="module")
def ros_python() -> str:
    python = os.environ.get(PYTHON_ENV) or (str(checkout_venv()) if checkout_venv().exists() else None)
    why = "no ROS Python (set HIL_ROS_PYTHON or run make test, which builds .venv-ros)" if python is None \
        else works(python)
    if why is not None:
        if os.environ.get("CI"):
            pytest.fail(f"the ROS 2 tests need rclpy: {why}")
        pytest.skip(why)
    return python


_DOMAINS = itertools.count()


@pytest.fixture
def ros_env(ros_python) -> dict[str, str]:
    """A domain of this test's own (from the process id, so parallel test processes differ) on localhost."""
    domain = 1 + (os.getpid() * 7 + next(_DOMAINS)) % 100
    return {**os.environ, "ROS_DOMAIN_ID": str(domain), "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
            PYTHON_ENV: ros_python}

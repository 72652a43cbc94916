"""ROS 2 stacks drive hil's robot: ``hil trial --ros`` and ``hil ros`` (docs/ROS.md, "The ROS 2 bridge").

Two processes, one wire (ZeroMQ on loopback, msgpack envelopes as everywhere in hil):

    link.py      RosLink: in the trial's process, a recorder tap and an after-cycle hook; publishes the robot's
                 state after every bus cycle (PUB) and takes the commands the bridge forwards (PULL), checked
    drive.py     RosDrive: the trial's controller under ``hil trial --ros``: the newest /cmd_vel on the base,
                 within the wheels' limits, a watchdog, the lockstep paced to a real-time factor
    launch.py    finds a Python where rclpy imports and starts the bridge process in it (dies with the trial)
    cli.py       the --ros options of ``hil trial`` and the ``hil ros`` command (defaults.py: the options'
                 defaults, apart so that the command line starts without importing the robot)
    ros_side/    the bridge process itself, run by ROS's Python: it imports rclpy, the message packages, pyzmq
                 and msgpack, and nothing of hil; fastdds_discovery.xml, its Fast DDS profile (launch.py)
"""

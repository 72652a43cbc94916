"""The bridge process, run by path with ROS's Python (bridge_node.py): nothing here imports hil."""

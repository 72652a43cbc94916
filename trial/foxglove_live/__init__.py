"""Foxglove, live and on replays: foxglove-sdk's WebSocket server fed from the trial's log.

    address.py   ``[HOST:]PORT`` of ``--foxglove`` (loopback unless a host is given)
    channels.py  ServedChannels: the log's channels, schemas and bytes as SDK channels of one server's context
    live.py      LiveServer: a running trial served (a recorder tap + an after-cycle hook), steered from Foxglove
    replay.py    ReplayServer: a recorded trial served with seek, play and speed (``hil view DIR --foxglove``)
    layout.py    the layout ``hil foxglove-layout`` prints, and its check
    cli.py       the ``--foxglove`` option and ``hil foxglove-layout``
"""

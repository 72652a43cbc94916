"""``--foxglove [HOST:]PORT``: where the Foxglove WebSocket server listens."""
from __future__ import annotations

DEFAULT_HOST = "127.0.0.1"  # loopback unless the user names a host (ssh -L for a remote machine)
DEFAULT_PORT = 8765  # the port Foxglove's "Open connection" dialog proposes


def parse_address(text: str | None) -> tuple[str, int]:
    """``"8765"``, ``":8765"``, ``"0.0.0.0:9000"`` or ``""``/None (the default) -> (host, port); ValueError saying
    what is wrong otherwise. Port 0: any free port (the server says which)."""
    if text is None or text == "":
        return DEFAULT_HOST, DEFAULT_PORT
    host, sep, port_text = text.rpartition(":")
    if not sep:
        host, port_text = "", text
    host = host.strip("[]") or DEFAULT_HOST
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"--foxglove {text!r}: the port must be a number ([HOST:]PORT, e.g. 8765 or "
                         f"127.0.0.1:8765), not {port_text!r}") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"--foxglove {text!r}: port {port} is not in 0..65535")
    return host, port

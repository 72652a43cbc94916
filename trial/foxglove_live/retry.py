"""``hil/retry``: "retry from here" as a Foxglove service (issue 28 item 2, on issue 27's saved states).

Called from Foxglove (its Service Call panel) on a live trial or a replay, it writes the trial file that starts
again from the trial's saved state at the current time -- the live trial's time, the replay's playback position --
beside the trial (``retry-from-T s.yaml``, the original's keys with ``from:`` added, as the viewer's button
does: trial/state/retry.py) and answers ``{"t", "trial_file", "command"}``, the command being the
``hil trial ... --from DIR@T`` line. A JSON request may name another ``controller`` to retry with. A trial
that saved no states (``--state-every 0``, a mixed trial), or a request that is not JSON, is refused with the
reason, which Foxglove shows; nothing is written then.
"""
from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

RETRY_SERVICE = "hil/retry"


def retry_from_here(folder: Path | None, t: float, payload: bytes) -> bytes:
    """The service's answer (JSON bytes), or ValueError saying why not."""
    from ..state import files
    from ..state.retry import retry_command, retry_trial_file

    controller = None
    if payload:
        try:
            doc = json.loads(bytes(payload).decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ValueError(f"the request must be JSON ({{}} or {{\"controller\": \"path.py\"}}): {exc}") from None
        if not isinstance(doc, dict) or not isinstance(doc.get("controller", ""), str):
            raise ValueError("the request must be a JSON object whose 'controller' is a string")
        controller = doc.get("controller") or None
    if folder is None or not (Path(folder) / files.STATES).is_dir():
        raise ValueError(f"no saved states to retry from in {folder or 'this trial (it records nothing)'} (a trial "
                         "saves them unless run with --state-every 0; a mixed trial saves none)")
    t = round(max(0.0, t), 1)
    try:
        path = retry_trial_file(Path(folder), t, Path(folder) / f"retry-from-{t:g}s.yaml", controller)
    except (OSError, ValueError) as exc:
        raise ValueError(f"cannot write the retry trial file in {folder}: {exc}") from None
    return json.dumps({"t": t, "trial_file": str(path),
                       "command": retry_command(Path(folder), t, controller)}).encode()


def retry_service(folder_of: Callable[[], Path | None], time_of: Callable[[], float], refused: Callable | None = None):
    """The foxglove-sdk Service; ``refused(why, request)`` is told of each refusal (the live server logs it)."""
    import foxglove

    def handler(request: Any) -> bytes:
        try:
            return retry_from_here(folder_of(), time_of(), request.payload)
        except ValueError as exc:
            if refused is not None:
                refused(str(exc), request)
            raise

    schema = foxglove.MessageSchema(encoding="json", schema=foxglove.Schema(
        name="hil.RetryRequest", encoding="jsonschema",
        data=json.dumps({"type": "object", "properties": {"controller": {"type": "string"}}}).encode()))
    return foxglove.Service(RETRY_SERVICE, schema=foxglove.ServiceSchema("hil.Retry", request=schema),
                            handler=handler)

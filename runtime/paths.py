"""Where the runtime keeps per-user files: an environment variable wins, then the XDG base directory."""
from __future__ import annotations

import os
from pathlib import Path


def user_path(env_var: str, xdg_var: str, xdg_default: str, *parts: str) -> Path:
    """``$env_var`` if set, else ``$xdg_var`` (or ``~/xdg_default``) joined with ``parts``."""
    explicit = os.environ.get(env_var)
    if explicit:
        return Path(explicit)
    base = os.environ.get(xdg_var) or os.path.join(os.path.expanduser("~"), xdg_default)
    return Path(base).joinpath(*parts)

"""The versions a trial log records (``/trial/meta`` ``versions``): what made the log, so a reader can tell."""
from __future__ import annotations


def versions() -> dict[str, str]:
    """{package: version} for hil and the libraries whose behaviour shapes the log's bytes."""
    from importlib.metadata import PackageNotFoundError, version

    from hil import __version__  # the product's version (metadata only; no code of the CLI is used)

    found = {"hil": __version__}
    for name in ("mcap", "pybullet", "numpy"):
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "unknown"
    return found

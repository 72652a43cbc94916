"""Build the time shim from the C source shipped in this package, once per user and source.

``ensure_built()`` compiles ``hiltime.c`` (a shared library for LD_PRELOAD) with the system C compiler into a
per-user cache directory named after the hash of the source and flags (``$HIL_NATIVE_CACHE``, else
``$XDG_CACHE_HOME/hil/native``, else ``~/.cache/hil/native``), and returns its path; later calls find it there.
Built on first use rather than at install so a wheel stays pure Python and the library always matches the
machine's libc. What is missing (no compiler, no C headers) is named in the error.
"""
from __future__ import annotations

import hashlib
import os
import shlex
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hil.bridge.process import spawn

from ..paths import user_path

SOURCE_DIR = Path(__file__).resolve().parent
SHIM_SOURCE = "hiltime.c"
SHIM_FLAGS = ("-O2", "-fPIC", "-shared", "-pthread", "-Wall")
SHIM_LIBS = ("-ldl",)
COMPILERS = ("cc", "gcc", "clang")


class NativeBuildError(RuntimeError):
    """The shim cannot be built here; the message names what is missing."""


@dataclass(frozen=True)
class NativeTools:
    shim: Path         # libhiltime.so, for LD_PRELOAD
    compiler: str


def cache_root() -> Path:
    return user_path("HIL_NATIVE_CACHE", "XDG_CACHE_HOME", ".cache", "hil", "native")


def find_compiler() -> list[str]:
    """``$CC`` if set, else the first of cc, gcc, clang on PATH."""
    explicit = os.environ.get("CC", "").strip()
    if explicit:
        words = shlex.split(explicit)
        if shutil.which(words[0]) is None:
            raise NativeBuildError(f"cannot build the native time shim: CC={explicit!r} is not an executable on PATH")
        return words
    for name in COMPILERS:
        found = shutil.which(name)
        if found:
            return [found]
    raise NativeBuildError("cannot build the native time shim: no C compiler found (looked for $CC, "
                           f"{', '.join(COMPILERS)} on PATH); install one, e.g. `apt-get install gcc`")


def build_key(compiler: list[str]) -> str:
    digest = hashlib.sha256()
    digest.update((SOURCE_DIR / SHIM_SOURCE).read_bytes())
    digest.update(" ".join([*compiler, *SHIM_FLAGS, *SHIM_LIBS]).encode())
    return digest.hexdigest()[:16]


def ensure_built(cache_dir: Path | None = None) -> NativeTools:
    """The built shim, compiling it if this source and compiler have not been built before."""
    compiler = find_compiler()
    folder = (cache_dir or cache_root()) / build_key(compiler)
    shim = folder / "libhiltime.so"
    if not shim.is_file():
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise NativeBuildError(f"cannot build the native time shim: cannot create {folder}: {exc.strerror} "
                                   "(set HIL_NATIVE_CACHE to a writable directory)") from None
        _compile(compiler, [*SHIM_FLAGS, str(SOURCE_DIR / SHIM_SOURCE), *SHIM_LIBS], shim)
    return NativeTools(shim, " ".join(compiler))


def _compile(compiler: list[str], args: list[str], target: Path) -> None:
    """Compile into a temporary name and rename, so concurrent first uses never see half a file."""
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    os.close(fd)
    try:
        cc = spawn([*compiler, *args, "-o", tmp], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        _, errors = cc.communicate()
        if cc.returncode != 0:
            raise NativeBuildError(_explain(compiler, args, errors))
        os.chmod(tmp, 0o755)
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _explain(compiler: list[str], args: list[str], stderr: str) -> str:
    source = next((a for a in args if a.endswith(".c")), "?")
    hint = ""
    if ".h: No such file" in stderr or "fatal error:" in stderr and ".h" in stderr:
        hint = " (the C library headers are missing: install them, e.g. `apt-get install libc6-dev`)"
    return (f"cannot build the native time shim: {' '.join(compiler)} failed on {source}{hint}:\n"
            f"{stderr.strip()[-2000:]}")

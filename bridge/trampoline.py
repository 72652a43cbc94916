"""The first program of every child hil starts (bridge/process.py ``spawn``): tie this process to its parent, then
become the real program.

    python -I -S trampoline.py PARENT_PID SIGNAL PRELOAD|- PID_ENV|- PROGRAM ARGV0 [ARGS...]

Run as a script, isolated (``-I -S``: no site, no PYTHON* variables, nothing of hil imported), so it starts in
~20 ms and runs the same whatever the caller's environment. It asks the kernel for ``SIGNAL`` when its parent
thread ends (Linux ``prctl(PR_SET_PDEATHSIG)``, which survives the exec below), checks that ``PARENT_PID`` is
still its parent (the parent may have died before the prctl took effect: then it goes, exit
:data:`EXIT_PARENT_GONE`), puts ``PRELOAD`` first in LD_PRELOAD and sets ``PID_ENV`` to its own pid (only here,
so the library is not loaded into this interpreter, and the pid is the program's: exec keeps it), restores the
signals Python ignores at start-up (SIGPIPE, SIGXFSZ) and replaces itself with ``PROGRAM`` (already resolved by
the parent), its argv starting with ``ARGV0``. No Python runs in the parent's forked child between fork and
exec: that is why this is a program of its own and not a ``preexec_fn``.
"""
import os
import sys

PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
EXIT_PARENT_GONE = 125  # the parent died before this child could tie itself to it: the program never started
EXIT_CANNOT_EXEC = 126
EXIT_NOT_FOUND = 127


def _die_with_parent(death_signal: int) -> None:
    if not sys.platform.startswith("linux"):
        return  # no prctl: the child's own loop watches HIL_PARENT_PID (bridge/process.py ParentWatch)
    import ctypes

    if ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, death_signal, 0, 0, 0) != 0:
        sys.stderr.write(f"hil: cannot tie the child to its parent: prctl: {os.strerror(ctypes.get_errno())}\n")
        os._exit(EXIT_CANNOT_EXEC)


def main(argv: list) -> None:
    parent, death_signal, preload, pid_env, program = argv[1:6]
    _die_with_parent(int(death_signal))
    if os.getppid() != int(parent):
        os._exit(EXIT_PARENT_GONE)
    env = dict(os.environ)
    if preload != "-":
        env["LD_PRELOAD"] = f"{preload}:{env['LD_PRELOAD']}" if env.get("LD_PRELOAD") else preload
    if pid_env != "-":
        env[pid_env] = str(os.getpid())
    import _signal  # the C module: `signal` would import enum, ~4 ms

    for name in ("SIGPIPE", "SIGXFSZ"):  # as subprocess's restore_signals does for a direct child
        if hasattr(_signal, name):
            _signal.signal(getattr(_signal, name), _signal.SIG_DFL)
    try:
        os.execve(program, argv[6:], env)
    except OSError as exc:
        sys.stderr.write(f"hil: cannot start {program}: {exc.strerror}\n")
        os._exit(EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_CANNOT_EXEC)


if __name__ == "__main__":
    main(sys.argv)

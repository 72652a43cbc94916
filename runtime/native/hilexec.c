/* hil-exec: start a native controller so that it dies with hil.
 *
 *   hil-exec PARENT_PID PRELOAD PROGRAM [ARGS...]
 *
 * Sets PR_SET_PDEATHSIG (SIGKILL) and checks that PARENT_PID is still its parent (hil may have died before the
 * prctl), then replaces itself with PROGRAM. PRELOAD is "-" (the real clock: the program runs untouched) or the
 * path of the time shim: it is put first in LD_PRELOAD and HIL_CLOCK_PID names this process (the exec keeps the
 * pid), so the shim knows the participant from a child of it. Done here and not in Python's preexec_fn, which is
 * not safe in a process with threads (hil has the bus server's and the clock relay's).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: %s PARENT_PID PRELOAD|- PROGRAM [ARGS...]\n", argv[0]);
        return 2;
    }
    long parent = strtol(argv[1], NULL, 10);
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) {
        fprintf(stderr, "hil-exec: prctl(PR_SET_PDEATHSIG): %s\n", strerror(errno));
        return 126;
    }
    if ((long)getppid() != parent) return 126;   /* hil is already gone: do not start an orphan */
    if (strcmp(argv[2], "-") != 0) {
        const char *old = getenv("LD_PRELOAD");
        size_t size = strlen(argv[2]) + (old ? strlen(old) + 2 : 1);
        char *preload = malloc(size);
        char pid[32];
        if (!preload) return 126;
        snprintf(preload, size, old && *old ? "%s:%s" : "%s", argv[2], old);
        snprintf(pid, sizeof pid, "%ld", (long)getpid());
        if (setenv("LD_PRELOAD", preload, 1) || setenv("HIL_CLOCK_PID", pid, 1)) return 126;
    }
    execvp(argv[3], argv + 3);
    fprintf(stderr, "hil run --native: cannot start %s: %s\n", argv[3], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}

/* The end of a native program, for the failure tests: prints its pid, then by its argument
 *   ticks N     prints the monotonic time every 10 ms, N times (0: for ever)
 *   exit N      exits with status N after one sleep
 *   crash       dies of SIGSEGV after one sleep
 *   fork        a child (fork, no exec) sleeps and reads the clock, then the parent reads it
 *   block       waits for ever without a time call (read on stdin)
 *   exec        replaces itself (same pid) with "lifecycle ticks 2": the participant stays, time goes on
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static long long mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    const char *what = argc > 1 ? argv[1] : "ticks";
    long n = argc > 2 ? atol(argv[2]) : 0;
    printf("pid %d\n", (int)getpid());
    fflush(stdout);
    if (!strcmp(what, "block")) {
        char c;
        while (read(0, &c, 1) != 0) {}
        return 0;
    }
    usleep(10000);
    if (!strcmp(what, "exit")) return (int)n;
    if (!strcmp(what, "crash")) raise(SIGSEGV);
    if (!strcmp(what, "exec")) {
        execl("/proc/self/exe", argv[0], "ticks", "2", (char *)NULL);
        return 99;
    }
    if (!strcmp(what, "fork")) {
        pid_t child = fork();
        if (child == 0) {
            usleep(1000);
            printf("child %lld\n", mono_ns() > 0 ? 1LL : 0LL);
            fflush(stdout);
            _exit(0);
        }
        int status;
        waitpid(child, &status, 0);
        printf("parent %lld status %d\n", mono_ns(), WEXITSTATUS(status));
        return 0;
    }
    for (long k = 0; n == 0 || k < n; k++) {
        usleep(10000);
        printf("t %lld\n", mono_ns());
        fflush(stdout);
    }
    return 0;
}

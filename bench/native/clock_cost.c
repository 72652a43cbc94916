/* The cost of one clock_gettime(CLOCK_MONOTONIC): N calls, timed with the raw system call (which neither the shim
 * nor the vDSO intercepts, so the measurement is wall time under the shim too). Prints ns per call. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static long long raw_ns(void) {
    struct timespec ts;
    syscall(SYS_clock_gettime, CLOCK_MONOTONIC_RAW, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 5000000;
    struct timespec ts;
    long long sink = 0, start = raw_ns();
    for (long k = 0; k < n; k++) {
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sink += ts.tv_nsec;
    }
    long long took = raw_ns() - start;
    printf("%.2f %lld\n", (double)took / (double)n, sink & 1);
    return 0;
}

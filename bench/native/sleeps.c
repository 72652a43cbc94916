/* N sleeps of PERIOD_NS each with nanosleep, then the monotonic time it reads: "sleeps N PERIOD_NS". */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 60;
    long long period = argc > 2 ? atoll(argv[2]) : 1000000000LL;
    struct timespec step = {period / 1000000000LL, period % 1000000000LL}, now;
    for (long k = 0; k < n; k++) nanosleep(&step, NULL);
    clock_gettime(CLOCK_MONOTONIC, &now);
    printf("%lld\n", now.tv_sec * 1000000000LL + now.tv_nsec);
    return 0;
}

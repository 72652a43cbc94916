/* 60 sleeps of 1 s (nanosleep and usleep in turn), printing CLOCK_MONOTONIC and CLOCK_REALTIME before each and
 * after the last: only clock_gettime, nanosleep and usleep (the shim's acceptance program). */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static long long read_ns(clockid_t clock) {
    struct timespec ts;
    clock_gettime(clock, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(void) {
    for (int i = 0; i <= 60; i++) {
        printf("%d %lld %lld\n", i, read_ns(CLOCK_MONOTONIC), read_ns(CLOCK_REALTIME));
        if (i == 60) break;
        if (i % 2 == 0) {
            struct timespec second = {1, 0};
            nanosleep(&second, NULL);
        } else {
            usleep(1000000);
        }
    }
    return 0;
}

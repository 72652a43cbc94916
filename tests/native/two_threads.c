/* Two threads sleeping at different rates (10 ms x 100 with clock_nanosleep, 25 ms x 40 with nanosleep), each
 * printing the monotonic time it wakes at; main joins both and prints the time once more. Under the shim all three
 * must read one simulated time: every wake exactly at its deadline, the end at 1 s. */
#include <pthread.h>
#include <stdio.h>
#include <time.h>

static pthread_mutex_t out = PTHREAD_MUTEX_INITIALIZER;

static long long mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void report(const char *who, int k, long long t) {
    pthread_mutex_lock(&out);
    printf("%s %d %lld\n", who, k, t);
    pthread_mutex_unlock(&out);
}

static void *fast(void *unused) {
    (void)unused;
    struct timespec next;
    clock_gettime(CLOCK_MONOTONIC, &next);
    for (int k = 1; k <= 100; k++) {
        next.tv_nsec += 10000000;
        if (next.tv_nsec >= 1000000000) { next.tv_nsec -= 1000000000; next.tv_sec++; }
        clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &next, NULL);
        report("fast", k, mono_ns());
    }
    return NULL;
}

static void *slow(void *unused) {
    (void)unused;
    for (int k = 1; k <= 40; k++) {
        struct timespec step = {0, 25000000};
        nanosleep(&step, NULL);
        report("slow", k, mono_ns());
    }
    return NULL;
}

int main(void) {
    pthread_t a, b;
    report("main", 0, mono_ns());
    pthread_create(&a, NULL, fast, NULL);
    pthread_create(&b, NULL, slow, NULL);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    report("main", 1, mono_ns());
    return 0;
}

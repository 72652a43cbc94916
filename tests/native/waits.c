/* Waits with timeouts under the shim: poll, select and epoll_wait with nothing to wait for last exactly their
 * timeout in simulated time; with a pipe that a second thread writes 300 ms later they return then, with the data;
 * a busy-wait on the clock (no sleep at all) still gets its 50 ms. Prints "NAME rc RC at NS" per step. */
#include <pthread.h>
#include <poll.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <time.h>
#include <unistd.h>

static int pipe_fds[2];

static long long mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void *writer(void *unused) {
    (void)unused;
    struct timespec later = {0, 300000000};
    nanosleep(&later, NULL);
    ssize_t ignored = write(pipe_fds[1], "x", 1);
    (void)ignored;
    return NULL;
}

static void step(const char *name, int kind, int with_data) {
    pthread_t thread;
    char byte;
    long long start = mono_ns();
    if (with_data) pthread_create(&thread, NULL, writer, NULL);
    int rc = -1, ready = 0;
    if (kind == 0) {
        struct pollfd p = {pipe_fds[0], POLLIN, 0};
        rc = poll(&p, 1, with_data ? 2000 : 250);
        ready = (p.revents & POLLIN) != 0;
    } else if (kind == 1) {
        fd_set readable;
        FD_ZERO(&readable);
        FD_SET(pipe_fds[0], &readable);
        struct timeval tv = {with_data ? 2 : 0, with_data ? 0 : 250000};
        rc = select(pipe_fds[0] + 1, &readable, NULL, NULL, &tv);
        ready = FD_ISSET(pipe_fds[0], &readable);
    } else {
        int ep = epoll_create1(0);
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = pipe_fds[0]}, out[4];
        epoll_ctl(ep, EPOLL_CTL_ADD, pipe_fds[0], &ev);
        rc = epoll_wait(ep, out, 4, with_data ? 2000 : 250);
        ready = rc == 1 && out[0].data.fd == pipe_fds[0];
        close(ep);
    }
    long long took = mono_ns() - start;
    if (with_data) {
        pthread_join(thread, NULL);
        if (read(pipe_fds[0], &byte, 1) != 1) ready = -1;
    }
    printf("%s rc %d ready %d at %lld\n", name, rc, ready, took);
}

int main(void) {
    if (pipe(pipe_fds)) return 1;
    step("poll-timeout", 0, 0);
    step("select-timeout", 1, 0);
    step("epoll-timeout", 2, 0);
    step("poll-data", 0, 1);
    step("select-data", 1, 1);
    step("epoll-data", 2, 1);
    long long start = mono_ns(), now;
    while ((now = mono_ns()) - start < 50000000LL) {}   /* spins: never sleeps */
    printf("spin rc 0 ready 0 at %lld\n", now - start);
    return 0;
}

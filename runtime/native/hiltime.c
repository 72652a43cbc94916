/* hiltime: an unmodified native program on the simulator's clock (the simulator-clock reference: "LD_PRELOAD to
 * overwrite the clock-related system calls such as gettimeofday and usleep").
 *
 * Loaded with LD_PRELOAD by `hil run --native` under `clock: sim`, this library takes over the time functions of
 * the program: clock_gettime (REALTIME, MONOTONIC and their variants), gettimeofday, time, timespec_get read the
 * simulated time; nanosleep, clock_nanosleep, usleep, sleep and the timeouts of poll/ppoll/select/pselect/
 * epoll_wait/epoll_pwait(2) and of pthread_cond_timedwait/clockwait wait in simulated time (and pthread_cond_wait,
 * pthread_join count as waits). The whole process is ONE participant of the trial's lockstep
 * clock: it asks the clock to advance only when every thread of the program waits in one of those calls, and
 * then to the earliest wake time among them; all threads read one shared time.
 *
 * The clock is not spoken here: the program inherits one end of a SOCK_SEQPACKET socket pair (HIL_CLOCK_FD) whose
 * other end is a relay in the `hil` process (runtime/native/relay.py), a normal participant of the lockstep clock.
 * So no program links ZeroMQ or msgpack, and the relay can first let the in-process bus device answer everything
 * the program wrote before simulated time moves (a bus transaction takes no simulated time).
 *
 * Wire format (little endian, one datagram each; runtime/native/protocol.py is the other side):
 *   request  {u32 op, u32 flags, i64 t_ns, i64 pid}        op: HELLO, SLEEP (flags: FD_WAITERS), COMMIT
 *   reply    {u32 kind, u32 text_len, i64 now_ns, i64 epoch} + text    kind: WELCOME, WAKE, QUIET, ERROR
 * SLEEP t asks for simulated time t. Without FD_WAITERS the relay answers WAKE once time has come. With it, the
 * relay answers QUIET once the bus is quiet: the library then checks the waiting threads' descriptors (data that
 * came ends their wait at the present time) and only if none is ready sends COMMIT t, answered by WAKE.
 *
 * Environment: HIL_CLOCK_FD (the socket), HIL_CLOCK_PID (the participant's pid: a child process that inherits the
 * library runs on the wall clock, with a warning), HIL_CLOCK_ENDPOINT (named in error messages),
 * HIL_CLOCK_EPOCH_NS (CLOCK_REALTIME = epoch + simulated time), HIL_CLOCK_IO_GRACE_MS (how long, in wall time,
 * waits on descriptors get for data from outside before simulated time moves), HIL_CLOCK_SPIN
 * ("reads,grace_ms,quantum_us" or "0": a thread that only reads the clock, spinning, gets simulated time in
 * quanta instead of hanging). Without HIL_CLOCK_FD the library does nothing.
 *
 * Failure: when the clock or the relay goes away, the next time call of the program prints a message naming the
 * clock on stderr and the program exits with status 70; it never hangs.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>
#include <fcntl.h>

#define NS_PER_S 1000000000LL
#define NO_DEADLINE INT64_MAX
#define EXIT_CLOCK_FAILED 70

enum { OP_HELLO = 1, OP_SLEEP = 2, OP_COMMIT = 3 };
enum { FLAG_FD_WAITERS = 1 };
enum { REPLY_WELCOME = 1, REPLY_WAKE = 2, REPLY_QUIET = 3, REPLY_ERROR = 4 };
enum { STATE_UNSET = 0, STATE_INERT, STATE_CHILD, STATE_ENGAGED };
enum { KIND_OTHER = 0, KIND_MONOTONIC, KIND_REALTIME, KIND_TAI };
enum { THREAD_RUNNING = 0, THREAD_ASLEEP, THREAD_WOKEN };
enum { WOKE_DEADLINE = 1, WOKE_SIGNAL };

struct request { uint32_t op, flags; int64_t t_ns, pid; };
struct reply { uint32_t kind, text_len; int64_t now_ns, epoch; char text[1024]; };
#define REPLY_HEAD ((ssize_t)offsetof(struct reply, text))

/* One thread of the program. All fields but the spin counters are guarded by g_mu. */
struct thread_rec {
    struct thread_rec *next;
    pthread_t thread;
    pid_t tid;
    int efd;                  /* the clock thread writes it to end this thread's wait */
    int state;                /* THREAD_RUNNING / ASLEEP / WOKEN (woken by someone else, not yet returned) */
    int64_t deadline;         /* while asleep; NO_DEADLINE for an infinite wait or a join */
    struct pollfd *wfds;      /* while asleep: the descriptors it waits on (its own copy) */
    nfds_t nwfds;
    struct thread_rec *joining;   /* while in pthread_join: the thread it waits for */
    pthread_cond_t *cond;         /* while in pthread_cond_*wait: the condition variable */
    int woke_by;                  /* WOKE_DEADLINE or WOKE_SIGNAL, when woken by someone else */
    int graced;                   /* this wait on descriptors has had its wall-time grace for outside data */
    unsigned long reads;      /* clock reads since its last wait (spin detection; its own thread only) */
    int64_t spin_wall0;
    int spinning;
};

/* the real functions, found behind this library */
static int (*real_clock_gettime)(clockid_t, struct timespec *);
static int (*real_gettimeofday)(struct timeval *, void *);
static time_t (*real_time)(time_t *);
static int (*real_timespec_get)(struct timespec *, int);
static int (*real_nanosleep)(const struct timespec *, struct timespec *);
static int (*real_clock_nanosleep)(clockid_t, int, const struct timespec *, struct timespec *);
static int (*real_usleep)(useconds_t);
static unsigned (*real_sleep)(unsigned);
static int (*real_poll)(struct pollfd *, nfds_t, int);
static int (*real_ppoll)(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *);
static int (*real_select)(int, fd_set *, fd_set *, fd_set *, struct timeval *);
static int (*real_pselect)(int, fd_set *, fd_set *, fd_set *, const struct timespec *, const sigset_t *);
static int (*real_epoll_wait)(int, struct epoll_event *, int, int);
static int (*real_epoll_pwait)(int, struct epoll_event *, int, int, const sigset_t *);
static int (*real_pthread_create)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static int (*real_pthread_join)(pthread_t, void **);
static int (*real_cond_wait)(pthread_cond_t *, pthread_mutex_t *);
static int (*real_cond_timedwait)(pthread_cond_t *, pthread_mutex_t *, const struct timespec *);
static int (*real_cond_signal)(pthread_cond_t *);
static int (*real_cond_broadcast)(pthread_cond_t *);
static int (*real_cond_init)(pthread_cond_t *, const pthread_condattr_t *);
static int (*real_cond_destroy)(pthread_cond_t *);
static int (*real_cond_clockwait)(pthread_cond_t *, pthread_mutex_t *, clockid_t, const struct timespec *);  /* 2.30+ */

static volatile int g_state;
static int g_sock = -1;
static pid_t g_pid;
static char g_endpoint[512] = "the simulator's clock";
static int64_t g_epoch_ns;         /* CLOCK_REALTIME - CLOCK_MONOTONIC under the shim */
static int64_t g_tai_ns;           /* CLOCK_TAI - CLOCK_REALTIME, as the kernel has it */
static _Atomic int64_t g_now_ns;   /* simulated time: 0 until the first tick */
static atomic_int g_dead;          /* the clock failed; g_dead_msg says why */
static char g_dead_msg[1400];
static int64_t g_io_grace_ns = 20 * 1000000LL;
static unsigned long g_spin_reads = 10000;
static int64_t g_spin_grace_ns = 50 * 1000000LL;
static int64_t g_spin_quantum_ns = 1000000LL;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static struct thread_rec *g_threads;   /* every live thread we know */
static int g_counted;                  /* how many of them */
static int g_asleep;                   /* how many of them wait (asleep, or parked in pthread_join) */
static unsigned long g_generation;     /* bumped whenever a thread starts waiting: a QUIET for older waits is stale */
static int g_ctl_efd = -1;             /* wakes the clock thread */
static int g_clock_thread_started;
static pthread_key_t g_key;
static __thread struct thread_rec *t_rec __attribute__((tls_model("initial-exec")));
static __thread int t_dying __attribute__((tls_model("initial-exec")));

static void init_once(void);

/* --- small helpers --------------------------------------------------------------------------------------------- */
static void say(const char *fmt, ...) {
    char buf[1600];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    if ((size_t)n >= sizeof buf) n = sizeof buf - 1;
    ssize_t ignored = write(2, buf, (size_t)n);
    (void)ignored;
}

static const char *program_name(void) {
    extern char *program_invocation_short_name;
    return program_invocation_short_name ? program_invocation_short_name : "?";
}

static int64_t wall_ns(void) {
    struct timespec ts;
    real_clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * NS_PER_S + ts.tv_nsec;
}

static int64_t ts_ns(const struct timespec *ts) { return ts->tv_sec * NS_PER_S + ts->tv_nsec; }

static void ns_ts(int64_t ns, struct timespec *ts) {
    if (ns < 0) ns = 0;
    ts->tv_sec = ns / NS_PER_S;
    ts->tv_nsec = ns % NS_PER_S;
}

static int valid_ts(const struct timespec *ts) {
    return ts && ts->tv_nsec >= 0 && ts->tv_nsec < NS_PER_S && ts->tv_sec >= 0;
}

static int64_t add_ns(int64_t a, int64_t b) { return (b > 0 && a > NO_DEADLINE - b) ? NO_DEADLINE : a + b; }

static void wake_fd(int fd) {
    uint64_t one = 1;
    ssize_t ignored = write(fd, &one, sizeof one);
    (void)ignored;
}

static void drain_fd(int fd) {
    uint64_t value;
    ssize_t ignored = read(fd, &value, sizeof value);
    (void)ignored;
}

static void notify_clock(void) { if (g_ctl_efd >= 0) wake_fd(g_ctl_efd); }

/* --- failure: the next time call says so and the program exits ------------------------------------------------- */
static void set_dead(const char *fmt, ...) {
    if (atomic_load(&g_dead)) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_dead_msg, sizeof g_dead_msg, fmt, ap);
    va_end(ap);
    atomic_store(&g_dead, 1);
}

static void die(void) {
    static atomic_flag once = ATOMIC_FLAG_INIT;
    if (t_dying) return;               /* the exiting thread's own atexit handlers: time stands still */
    if (atomic_flag_test_and_set(&once)) {
        for (;;) pause();              /* another thread is already on its way out with the message */
    }
    t_dying = 1;
    say("hil time shim (pid %d, %s): %s\n", (int)getpid(), program_name(), g_dead_msg);
    exit(EXIT_CLOCK_FAILED);
}

static void fatal(const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_dead_msg, sizeof g_dead_msg, fmt, ap);
    va_end(ap);
    atomic_store(&g_dead, 1);
    die();
}

/* --- the relay ---------------------------------------------------------------------------------------------------- */
static int send_request(uint32_t op, uint32_t flags, int64_t t_ns) {
    struct request req = {op, flags, t_ns, (int64_t)g_pid};
    for (;;) {
        ssize_t n = send(g_sock, &req, sizeof req, MSG_NOSIGNAL);
        if (n == (ssize_t)sizeof req) return 0;
        if (n < 0 && errno == EINTR) continue;
        set_dead("the clock relay of hil (%s) went away: cannot ask for the simulator's time (%s)", g_endpoint,
                 n < 0 ? strerror(errno) : "short write");
        return -1;
    }
}

static int receive_reply(struct reply *rep) {
    for (;;) {
        ssize_t n = recv(g_sock, rep, sizeof *rep - 1, 0);
        if (n < 0 && errno == EINTR) continue;
        if (n == 0 || (n < 0 && (errno == ECONNRESET || errno == EPIPE))) {
            set_dead("the clock relay of hil (%s) went away: the simulator's time is gone", g_endpoint);
            return -1;
        }
        if (n < 0) {   /* e.g. EBADF: the program closed the inherited descriptor */
            set_dead("cannot read from the clock relay of hil (%s) on descriptor %d: %s", g_endpoint, g_sock,
                     strerror(errno));
            return -1;
        }
        if (n < REPLY_HEAD) {
            set_dead("bad reply from the clock relay of hil (%s): %zd bytes", g_endpoint, n);
            return -1;
        }
        size_t len = rep->text_len < (size_t)(n - REPLY_HEAD) ? rep->text_len : (size_t)(n - REPLY_HEAD);
        rep->text[len] = 0;
        if (rep->kind == REPLY_ERROR) {
            set_dead("the simulator's clock failed (%s): %s", g_endpoint, rep->text);
            return -1;
        }
        return 0;
    }
}

/* --- threads ------------------------------------------------------------------------------------------------------ */
static struct thread_rec *new_rec(void) {
    struct thread_rec *r = calloc(1, sizeof *r);
    if (!r) fatal("out of memory");
    r->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (r->efd < 0) fatal("eventfd: %s", strerror(errno));
    return r;
}

static void add_rec(struct thread_rec *r) { r->next = g_threads; g_threads = r; g_counted++; }

static void remove_rec(struct thread_rec *r) {
    for (struct thread_rec **p = &g_threads; *p; p = &(*p)->next) {
        if (*p == r) { *p = r->next; g_counted--; return; }
    }
}

/* a thread we did not start (or the main thread): counted from its first wait */
static struct thread_rec *my_rec(void) {
    if (t_rec) return t_rec;
    struct thread_rec *r = new_rec();
    r->thread = pthread_self();
    r->tid = (pid_t)syscall(SYS_gettid);
    pthread_mutex_lock(&g_mu);
    add_rec(r);
    pthread_mutex_unlock(&g_mu);
    t_rec = r;
    pthread_setspecific(g_key, r);
    return r;
}

/* Mark a waiting thread as running again (its wait is over); the caller holds g_mu. Counting it here, before it
 * has even returned, is what keeps the clock from moving while it is about to run. */
static void wake_rec(struct thread_rec *r) {
    if (r->state != THREAD_ASLEEP) return;
    r->state = THREAD_WOKEN;
    g_asleep--;
    wake_fd(r->efd);
}

static void thread_gone(void *p) {
    struct thread_rec *r = p;
    pthread_mutex_lock(&g_mu);
    if (r->state == THREAD_ASLEEP) g_asleep--;     /* cancelled inside a wait */
    remove_rec(r);
    for (struct thread_rec *q = g_threads; q; q = q->next) {
        if (q->joining == r) { q->joining = NULL; wake_rec(q); }
    }
    pthread_mutex_unlock(&g_mu);
    notify_clock();
    close(r->efd);
    free(r);
    t_rec = NULL;
}

struct start { void *(*fn)(void *); void *arg; struct thread_rec *rec; };

static void *trampoline(void *p) {
    struct start s = *(struct start *)p;
    free(p);
    t_rec = s.rec;
    pthread_setspecific(g_key, s.rec);
    return s.fn(s.arg);
}

/* --- the clock thread: asks the relay to advance when every thread waits ------------------------------------------ */
static int all_asleep(void) { return g_counted > 0 && g_asleep == g_counted; }

/* the earliest deadline of the waiting threads (NO_DEADLINE: none) and whether any waits on descriptors */
static int64_t earliest(int *fd_waiters) {
    int64_t target = NO_DEADLINE;
    *fd_waiters = 0;
    for (struct thread_rec *r = g_threads; r; r = r->next) {
        if (r->state != THREAD_ASLEEP) continue;
        if (r->deadline < target) target = r->deadline;
        for (nfds_t i = 0; i < r->nwfds; i++) if (r->wfds[i].fd >= 0) *fd_waiters = 1;
    }
    return target;
}

static void wake_due(int64_t now) {
    for (struct thread_rec *r = g_threads; r; r = r->next) {
        if (r->state != THREAD_ASLEEP || r->deadline > now) continue;
        wake_rec(r);
        if (r->cond) {   /* broadcasting without the mutex is allowed; other waiters see a spurious wakeup */
            r->woke_by = WOKE_DEADLINE;
            real_cond_broadcast(r->cond);
        }
    }
}

/* Poll every waiting thread's descriptors; wake those with data. Returns how many woke. A wait that has not had
 * it yet gets ``grace_ms`` of wall time for data from outside (once per wait: a thread blocked for long on a
 * socket does not slow every later round). Called with g_mu held; the descriptors stay valid while their threads
 * are asleep, which they are until woken. */
static int wake_ready(int grace_ms) {
    struct pollfd local[64], *all = local;
    size_t n = 0;
    int timeout_ms = 0;
    for (struct thread_rec *r = g_threads; r; r = r->next) {
        if (r->state != THREAD_ASLEEP || !r->nwfds) continue;
        n += r->nwfds;
        if (!r->graced) { timeout_ms = grace_ms; r->graced = 1; }
    }
    if (n == 0) return 0;
    if (n > 64 && !(all = calloc(n, sizeof *all))) return 0;
    size_t k = 0;
    for (struct thread_rec *r = g_threads; r; r = r->next) {
        if (r->state != THREAD_ASLEEP) continue;
        for (nfds_t i = 0; i < r->nwfds; i++, k++) {
            all[k].fd = r->wfds[i].fd;
            all[k].events = r->wfds[i].events;
            all[k].revents = 0;
        }
    }
    int woke = 0;
    if (real_poll(all, n, timeout_ms) > 0) {
        k = 0;
        for (struct thread_rec *r = g_threads; r; r = r->next) {
            if (r->state != THREAD_ASLEEP) continue;
            int ready = 0;
            for (nfds_t i = 0; i < r->nwfds; i++, k++) if (all[k].revents) ready = 1;
            if (ready) { wake_rec(r); woke++; }
        }
    }
    if (all != local) free(all);
    return woke;
}

static void wake_everyone(void) {
    pthread_mutex_lock(&g_mu);
    for (struct thread_rec *r = g_threads; r; r = r->next) {
        if (r->state != THREAD_ASLEEP) continue;
        wake_fd(r->efd);
        if (r->cond) real_cond_broadcast(r->cond);
    }
    pthread_mutex_unlock(&g_mu);
}

/* Wait (wall time) for a state change, the relay closing, or ``timeout_ms``. */
static void wait_for_change(int timeout_ms) {
    struct pollfd p[2] = {{g_ctl_efd, POLLIN, 0}, {g_sock, POLLIN, 0}};
    int rc = real_poll(p, 2, timeout_ms);
    if (rc > 0 && p[0].revents) drain_fd(g_ctl_efd);
    if (rc > 0 && p[1].revents) {   /* nothing is asked: data or a hangup means the relay is gone or broken */
        struct reply rep;
        if (receive_reply(&rep) == 0)
            set_dead("the clock relay of hil (%s) sent a reply nobody asked for", g_endpoint);
    }
}

/* One round of the lockstep: returns 0 to go on, -1 when the clock failed. ``generation`` is g_generation when
 * ``target`` was taken: if a thread started a new wait since (it got its reply, wrote the next request and waits
 * again), the bus has not settled for that request and the round starts over. */
static int advance_once(int64_t target, int fd_waiters, unsigned long generation) {
    struct reply rep;
    if (send_request(OP_SLEEP, fd_waiters ? FLAG_FD_WAITERS : 0, target) < 0 || receive_reply(&rep) < 0) return -1;
    if (rep.kind == REPLY_QUIET) {
        /* the bus is quiet: whatever it had to say is in the descriptors now; outside data gets a grace */
        pthread_mutex_lock(&g_mu);
        int woke = all_asleep() ? wake_ready((int)(g_io_grace_ns / 1000000)) : 1;
        int go = !woke && all_asleep() && g_generation == generation;
        if (go) target = earliest(&fd_waiters);
        pthread_mutex_unlock(&g_mu);
        if (!go || target == NO_DEADLINE) return 0;
        if (send_request(OP_COMMIT, 0, target) < 0 || receive_reply(&rep) < 0) return -1;
    }
    if (rep.kind != REPLY_WAKE) {
        set_dead("unexpected reply %u from the clock relay of hil (%s)", rep.kind, g_endpoint);
        return -1;
    }
    pthread_mutex_lock(&g_mu);
    if (rep.now_ns > atomic_load(&g_now_ns)) atomic_store(&g_now_ns, rep.now_ns);
    else if (rep.now_ns < atomic_load(&g_now_ns)) atomic_store(&g_now_ns, rep.now_ns);  /* the simulator reset */
    wake_due(atomic_load(&g_now_ns));
    pthread_mutex_unlock(&g_mu);
    return 0;
}

static void *clock_main(void *unused) {
    (void)unused;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);   /* signals are the program's threads' business */
    int64_t waiting_since = 0;
    int warned = 0;
    while (!atomic_load(&g_dead)) {
        pthread_mutex_lock(&g_mu);
        int fd_waiters = 0;
        int64_t target = NO_DEADLINE;
        int sleeping = g_asleep, counted = g_counted;
        unsigned long generation = g_generation;
        if (all_asleep()) {
            target = earliest(&fd_waiters);
            if (target <= atomic_load(&g_now_ns)) { wake_due(atomic_load(&g_now_ns)); target = NO_DEADLINE; }
        }
        pthread_mutex_unlock(&g_mu);
        if (target != NO_DEADLINE) {
            waiting_since = 0;
            warned = 0;
            if (advance_once(target, fd_waiters, generation) < 0) break;
            continue;
        }
        if (sleeping > 0 && sleeping < counted) {   /* some wait, one is awake: say so if it lasts */
            int64_t now = wall_ns();
            if (!waiting_since) waiting_since = now;
            if (!warned && now - waiting_since > 10 * NS_PER_S) {
                warned = 1;
                say("hil time shim (pid %d, %s): %d of %d threads wait for the simulator's clock, the others have "
                    "been busy for 10 s of wall time; simulated time moves only when every thread waits in a "
                    "time call (a thread blocked elsewhere, e.g. in a condition variable, holds it)\n",
                    (int)getpid(), program_name(), sleeping, counted);
            }
        } else {
            waiting_since = 0;
        }
        wait_for_change(waiting_since ? 1000 : -1);
    }
    wake_everyone();    /* sleepers see g_dead and exit with the message */
    return NULL;
}

static void start_clock_thread(void) {
    /* caller holds g_mu */
    if (g_clock_thread_started) return;
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int rc = real_pthread_create(&thread, &attr, clock_main, NULL);
    pthread_attr_destroy(&attr);
    if (rc) {
        pthread_mutex_unlock(&g_mu);
        fatal("cannot start the clock thread: %s", strerror(rc));
    }
    g_clock_thread_started = 1;
}

/* --- waiting in simulated time ---------------------------------------------------------------------------------- */
static int engaged(void) {
    if (__builtin_expect(g_state == STATE_ENGAGED, 1)) return 1;
    if (g_state == STATE_UNSET) init_once();
    if (g_state == STATE_CHILD) {
        static atomic_flag warned = ATOMIC_FLAG_INIT;
        if (!atomic_flag_test_and_set(&warned))
            say("hil time shim (pid %d, %s): a child of the native controller runs on the wall clock; only the "
                "program started by hil run --native is on the simulator's clock\n", (int)getpid(), program_name());
    }
    return g_state == STATE_ENGAGED;
}

static int64_t now_ns(void) { return atomic_load_explicit(&g_now_ns, memory_order_acquire); }

/* The start and end of every wait. While asleep a thread is counted as waiting; a new wait bumps the generation. */
static void mark_asleep(struct thread_rec *r, int64_t deadline) {   /* caller holds g_mu */
    r->deadline = deadline;
    r->state = THREAD_ASLEEP;
    g_asleep++;
    g_generation++;
}

static void begin_wait(struct thread_rec *r, int64_t deadline, struct pollfd *wfds, nfds_t n, pthread_cond_t *cond) {
    pthread_mutex_lock(&g_mu);
    start_clock_thread();
    r->wfds = wfds;
    r->nwfds = n;
    r->cond = cond;
    r->woke_by = 0;
    r->graced = 0;
    mark_asleep(r, deadline);
    pthread_mutex_unlock(&g_mu);
    notify_clock();
}

static void end_wait(struct thread_rec *r) {
    pthread_mutex_lock(&g_mu);
    if (r->state == THREAD_ASLEEP) g_asleep--;   /* it woke by itself: data, a signal, the program's own wake-up */
    r->state = THREAD_RUNNING;
    r->wfds = NULL;
    r->nwfds = 0;
    r->cond = NULL;
    r->joining = NULL;
    pthread_mutex_unlock(&g_mu);
}

static void reset_spin(struct thread_rec *r) { r->reads = 0; r->spin_wall0 = 0; r->spinning = 0; }

/* Wait until simulated time reaches ``deadline`` or one of ``fds`` is ready. Returns the number of ready
 * descriptors (their revents set), 0 when the deadline came (revents cleared), -1 with errno (EINTR). */
static int sim_wait(int64_t deadline, struct pollfd *fds, nfds_t n, const sigset_t *sigmask, int implicit) {
    if (atomic_load(&g_dead)) { if (t_dying) return 0; die(); }
    struct thread_rec *r = my_rec();
    if (!implicit) reset_spin(r);
    if (n == 0 && deadline <= now_ns()) return 0;
    struct pollfd local[17], *all = n + 1 <= 17 ? local : calloc(n + 1, sizeof *all);
    if (!all) { errno = ENOMEM; return -1; }
    all[0] = (struct pollfd){r->efd, POLLIN, 0};
    for (nfds_t i = 0; i < n; i++) all[i + 1] = (struct pollfd){fds[i].fd, fds[i].events, 0};

    begin_wait(r, deadline, all + 1, n, NULL);
    int result = 0, err = 0;
    for (;;) {
        int rc = real_ppoll(all, n + 1, NULL, sigmask);
        if (rc < 0) {
            if (errno == EINTR) { result = -1; err = EINTR; break; }
            result = -1; err = errno; break;
        }
        if (all[0].revents) drain_fd(r->efd);
        int ready = 0;
        for (nfds_t i = 1; i <= n; i++) if (all[i].revents) ready++;
        if (ready) { result = ready; break; }
        if (atomic_load(&g_dead)) break;
        pthread_mutex_lock(&g_mu);
        int woken = r->state == THREAD_WOKEN;
        pthread_mutex_unlock(&g_mu);
        if (woken && (deadline <= now_ns())) { result = 0; break; }
        if (woken) {   /* woken for data that another thread took meanwhile: wait on */
            pthread_mutex_lock(&g_mu);
            mark_asleep(r, deadline);
            pthread_mutex_unlock(&g_mu);
            notify_clock();
        }
    }
    end_wait(r);
    for (nfds_t i = 0; i < n; i++) fds[i].revents = result > 0 ? all[i + 1].revents : 0;
    if (all != local) free(all);
    if (atomic_load(&g_dead) && !t_dying) die();
    if (err) errno = err;
    return result;
}

/* reads of the clock: shared simulated time; a thread that spins on it gets time in quanta */
static void spin_check(struct thread_rec *r) {
    r->reads = 0;
    if (!r->spinning) {
        int64_t wall = wall_ns();
        if (!r->spin_wall0) { r->spin_wall0 = wall; return; }
        if (wall - r->spin_wall0 < g_spin_grace_ns) return;
        r->spinning = 1;
    }
    sim_wait(now_ns() + g_spin_quantum_ns, NULL, 0, NULL, 1);
}

static int64_t read_now(void) {
    if (__builtin_expect(atomic_load_explicit(&g_dead, memory_order_relaxed), 0)) die();
    struct thread_rec *r = t_rec;
    if (r && g_spin_reads && (r->spinning || ++r->reads >= g_spin_reads)) spin_check(r);
    return now_ns();
}

static int clock_kind(clockid_t clock) {
    switch (clock) {
    case CLOCK_MONOTONIC: case CLOCK_MONOTONIC_RAW: case CLOCK_MONOTONIC_COARSE:
    case CLOCK_BOOTTIME: case CLOCK_BOOTTIME_ALARM:
        return KIND_MONOTONIC;
    case CLOCK_REALTIME: case CLOCK_REALTIME_COARSE: case CLOCK_REALTIME_ALARM:
        return KIND_REALTIME;
    case CLOCK_TAI:
        return KIND_TAI;
    default:
        return KIND_OTHER;   /* CPU-time clocks and dynamic clocks stay real */
    }
}

static int64_t offset_of(int kind) {
    return kind == KIND_REALTIME ? g_epoch_ns : kind == KIND_TAI ? g_epoch_ns + g_tai_ns : 0;
}

/* --- the interposed functions ----------------------------------------------------------------------------------- */
int clock_gettime(clockid_t clock, struct timespec *ts) {
    int kind;
    if (!engaged() || !(kind = clock_kind(clock))) return real_clock_gettime(clock, ts);
    ns_ts(read_now() + offset_of(kind), ts);
    return 0;
}

int gettimeofday(struct timeval *tv, void *tz) {
    if (!engaged()) return real_gettimeofday(tv, tz);
    int64_t ns = read_now() + g_epoch_ns;
    tv->tv_sec = ns / NS_PER_S;
    tv->tv_usec = (ns % NS_PER_S) / 1000;
    if (tz) memset(tz, 0, sizeof(struct timezone));
    return 0;
}

time_t time(time_t *out) {
    if (!engaged()) return real_time(out);
    time_t t = (time_t)((read_now() + g_epoch_ns) / NS_PER_S);
    if (out) *out = t;
    return t;
}

int timespec_get(struct timespec *ts, int base) {
    if (!engaged() || base != TIME_UTC) return real_timespec_get(ts, base);
    ns_ts(read_now() + g_epoch_ns, ts);
    return base;
}

int nanosleep(const struct timespec *req, struct timespec *rem) {
    if (!engaged()) return real_nanosleep(req, rem);
    if (!valid_ts(req)) { errno = EINVAL; return -1; }
    int64_t deadline = add_ns(now_ns(), ts_ns(req));
    if (sim_wait(deadline, NULL, 0, NULL, 0) < 0) {
        if (rem) ns_ts(deadline - now_ns(), rem);
        return -1;
    }
    return 0;
}

int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem) {
    int kind;
    if (!engaged() || !(kind = clock_kind(clock))) return real_clock_nanosleep(clock, flags, req, rem);
    if (!req || req->tv_nsec < 0 || req->tv_nsec >= NS_PER_S) return EINVAL;
    int64_t deadline = (flags & TIMER_ABSTIME) ? ts_ns(req) - offset_of(kind) : add_ns(now_ns(), ts_ns(req));
    if (sim_wait(deadline, NULL, 0, NULL, 0) < 0) {
        int err = errno;
        if (rem && !(flags & TIMER_ABSTIME)) ns_ts(deadline - now_ns(), rem);
        return err;
    }
    return 0;
}

int usleep(useconds_t usec) {
    if (!engaged()) return real_usleep(usec);
    return sim_wait(add_ns(now_ns(), (int64_t)usec * 1000), NULL, 0, NULL, 0) < 0 ? -1 : 0;
}

unsigned sleep(unsigned seconds) {
    if (!engaged()) return real_sleep(seconds);
    int64_t deadline = add_ns(now_ns(), (int64_t)seconds * NS_PER_S);
    if (sim_wait(deadline, NULL, 0, NULL, 0) < 0) {
        int64_t left = deadline - now_ns();
        return (unsigned)(left / NS_PER_S + (left % NS_PER_S >= NS_PER_S / 2));
    }
    return 0;
}

/* poll-style waits: data already there returns at once; a timeout is a wait in simulated time that data ends */
static int wait_pollfds(struct pollfd *fds, nfds_t n, int64_t timeout_ns, const sigset_t *sigmask) {
    int rc = real_ppoll(fds, n, &(struct timespec){0, 0}, sigmask);
    if (rc != 0) return rc;
    int64_t deadline = timeout_ns < 0 ? NO_DEADLINE : add_ns(now_ns(), timeout_ns);
    return sim_wait(deadline, fds, n, sigmask, 0);
}

int poll(struct pollfd *fds, nfds_t n, int timeout_ms) {
    if (!engaged() || timeout_ms == 0) return real_poll(fds, n, timeout_ms);
    return wait_pollfds(fds, n, timeout_ms < 0 ? -1 : (int64_t)timeout_ms * 1000000, NULL);
}

int __poll_chk(struct pollfd *fds, nfds_t n, int timeout_ms, size_t fdslen) {
    if (fdslen / sizeof *fds < n) abort();
    return poll(fds, n, timeout_ms);
}

int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *timeout, const sigset_t *sigmask) {
    if (!engaged() || (timeout && ts_ns(timeout) == 0)) return real_ppoll(fds, n, timeout, sigmask);
    if (timeout && !valid_ts(timeout)) { errno = EINVAL; return -1; }
    return wait_pollfds(fds, n, timeout ? ts_ns(timeout) : -1, sigmask);
}

int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *timeout, const sigset_t *sigmask,
                size_t fdslen) {
    if (fdslen / sizeof *fds < n) abort();
    return ppoll(fds, n, timeout, sigmask);
}

#define IN_SET (POLLIN | POLLHUP | POLLERR)
#define OUT_SET (POLLOUT | POLLERR)

static int wait_fdsets(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, int64_t timeout_ns, const sigset_t *sigmask) {
    fd_set r0, w0, e0;
    FD_ZERO(&r0); FD_ZERO(&w0); FD_ZERO(&e0);
    if (rd) r0 = *rd;
    if (wr) w0 = *wr;
    if (ex) e0 = *ex;
    int rc = real_pselect(nfds, rd ? &r0 : NULL, wr ? &w0 : NULL, ex ? &e0 : NULL, &(struct timespec){0, 0}, sigmask);
    if (rc != 0) {
        if (rc > 0) { if (rd) *rd = r0; if (wr) *wr = w0; if (ex) *ex = e0; }
        return rc;
    }
    struct pollfd local[32], *pfds = local;
    int m = 0;
    if (nfds > 32 && !(pfds = calloc((size_t)nfds, sizeof *pfds))) { errno = ENOMEM; return -1; }
    for (int fd = 0; fd < nfds; fd++) {
        short events = (short)((rd && FD_ISSET(fd, rd) ? POLLIN : 0) | (wr && FD_ISSET(fd, wr) ? POLLOUT : 0) |
                               (ex && FD_ISSET(fd, ex) ? POLLPRI : 0));
        if (events) pfds[m++] = (struct pollfd){fd, events, 0};
    }
    int64_t deadline = timeout_ns < 0 ? NO_DEADLINE : add_ns(now_ns(), timeout_ns);
    rc = sim_wait(deadline, pfds, (nfds_t)m, sigmask, 0);
    if (rc >= 0) {
        if (rd) FD_ZERO(rd);
        if (wr) FD_ZERO(wr);
        if (ex) FD_ZERO(ex);
        rc = 0;
        for (int i = 0; i < m; i++) {
            short ev = pfds[i].revents, want = pfds[i].events;
            if (ev & POLLNVAL) { rc = -1; errno = EBADF; break; }
            if ((want & POLLIN) && (ev & IN_SET)) { FD_SET(pfds[i].fd, rd); rc++; }
            if ((want & POLLOUT) && (ev & OUT_SET)) { FD_SET(pfds[i].fd, wr); rc++; }
            if ((want & POLLPRI) && (ev & POLLPRI)) { FD_SET(pfds[i].fd, ex); rc++; }
        }
    }
    if (pfds != local) free(pfds);
    return rc;
}

int select(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, struct timeval *tv) {
    if (!engaged() || (tv && tv->tv_sec == 0 && tv->tv_usec == 0)) return real_select(nfds, rd, wr, ex, tv);
    if (tv && (tv->tv_sec < 0 || tv->tv_usec < 0 || tv->tv_usec >= 1000000)) { errno = EINVAL; return -1; }
    if (nfds < 0 || nfds > FD_SETSIZE) { errno = EINVAL; return -1; }
    int64_t timeout = tv ? tv->tv_sec * NS_PER_S + tv->tv_usec * 1000LL : -1;
    int64_t start = now_ns();
    int rc = wait_fdsets(nfds, rd, wr, ex, timeout, NULL);
    if (tv && rc >= 0) {   /* Linux leaves the time not slept in *tv */
        int64_t left = timeout - (now_ns() - start);
        if (left < 0) left = 0;
        tv->tv_sec = left / NS_PER_S;
        tv->tv_usec = (left % NS_PER_S) / 1000;
    }
    return rc;
}

int pselect(int nfds, fd_set *rd, fd_set *wr, fd_set *ex, const struct timespec *timeout, const sigset_t *sigmask) {
    if (!engaged() || (timeout && ts_ns(timeout) == 0)) return real_pselect(nfds, rd, wr, ex, timeout, sigmask);
    if (timeout && !valid_ts(timeout)) { errno = EINVAL; return -1; }
    if (nfds < 0 || nfds > FD_SETSIZE) { errno = EINVAL; return -1; }
    return wait_fdsets(nfds, rd, wr, ex, timeout ? ts_ns(timeout) : -1, sigmask);
}

/* an epoll set is itself pollable: wait for it to become readable, then take its events */
static int wait_epoll(int epfd, struct epoll_event *events, int max, int64_t timeout_ns, const sigset_t *sigmask) {
    int rc = real_epoll_pwait(epfd, events, max, 0, sigmask);
    if (rc != 0) return rc;
    int64_t deadline = timeout_ns < 0 ? NO_DEADLINE : add_ns(now_ns(), timeout_ns);
    for (;;) {
        struct pollfd p = {epfd, POLLIN, 0};
        rc = sim_wait(deadline, &p, 1, sigmask, 0);
        if (rc <= 0) return rc;
        rc = real_epoll_pwait(epfd, events, max, 0, sigmask);
        if (rc != 0) return rc;
    }
}

int epoll_wait(int epfd, struct epoll_event *events, int max, int timeout_ms) {
    if (!engaged() || timeout_ms == 0) return real_epoll_wait(epfd, events, max, timeout_ms);
    if (max <= 0) { errno = EINVAL; return -1; }
    return wait_epoll(epfd, events, max, timeout_ms < 0 ? -1 : (int64_t)timeout_ms * 1000000, NULL);
}

int epoll_pwait(int epfd, struct epoll_event *events, int max, int timeout_ms, const sigset_t *sigmask) {
    if (!engaged() || timeout_ms == 0) return real_epoll_pwait(epfd, events, max, timeout_ms, sigmask);
    if (max <= 0) { errno = EINVAL; return -1; }
    return wait_epoll(epfd, events, max, timeout_ms < 0 ? -1 : (int64_t)timeout_ms * 1000000, sigmask);
}

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 35))
int epoll_pwait2(int epfd, struct epoll_event *events, int max, const struct timespec *timeout,
                 const sigset_t *sigmask) {
    static int (*real_epoll_pwait2)(int, struct epoll_event *, int, const struct timespec *, const sigset_t *);
    if (!real_epoll_pwait2) real_epoll_pwait2 = dlsym(RTLD_NEXT, "epoll_pwait2");
    if (!engaged() || (timeout && ts_ns(timeout) == 0)) return real_epoll_pwait2(epfd, events, max, timeout, sigmask);
    if (max <= 0 || (timeout && !valid_ts(timeout))) { errno = EINVAL; return -1; }
    return wait_epoll(epfd, events, max, timeout ? ts_ns(timeout) : -1, sigmask);
}
#endif

/* Threads count from their creation, so a thread that has not slept yet holds the clock (no race with its start). */
int pthread_create(pthread_t *thread, const pthread_attr_t *attr, void *(*fn)(void *), void *arg) {
    if (!engaged()) return real_pthread_create(thread, attr, fn, arg);
    struct thread_rec *r = new_rec();
    struct start *s = malloc(sizeof *s);
    if (!s) { close(r->efd); free(r); return EAGAIN; }
    *s = (struct start){fn, arg, r};
    pthread_mutex_lock(&g_mu);
    add_rec(r);
    pthread_mutex_unlock(&g_mu);
    int rc = real_pthread_create(thread, attr, trampoline, s);
    pthread_mutex_lock(&g_mu);
    if (rc) remove_rec(r);
    else r->thread = *thread;
    pthread_mutex_unlock(&g_mu);
    if (rc) { notify_clock(); close(r->efd); free(r); free(s); }
    return rc;
}

/* A thread in pthread_join waits; the joined thread's exit hands the turn back before the clock can move. */
int pthread_join(pthread_t thread, void **result) {
    if (!engaged()) return real_pthread_join(thread, result);
    struct thread_rec *self = my_rec();
    pthread_mutex_lock(&g_mu);
    struct thread_rec *target = NULL;
    for (struct thread_rec *q = g_threads; q; q = q->next) if (q != self && pthread_equal(q->thread, thread)) target = q;
    if (target) {
        self->joining = target;
        mark_asleep(self, NO_DEADLINE);
    }
    pthread_mutex_unlock(&g_mu);
    if (target) notify_clock();
    int rc = real_pthread_join(thread, result);
    end_wait(self);
    return rc;
}

/* --- condition variables: a wait with a timeout is a wait in simulated time; a signal hands the turn over ---------
 * The waiter is counted as waiting around the real, untimed wait; whoever ends the wait counts it running again
 * before it returns: pthread_cond_signal/broadcast of the program (one/all of the waiters we know on that
 * variable), or the clock thread at the deadline (by broadcasting the variable). Which waiter the real signal
 * wakes is libc's choice; if it is another than the one counted, both run and the other one's wait returns 0 (a
 * spurious wakeup, which callers must allow), so the counts stay right. The real wait wakes every COND_POLL_MS of
 * wall time to close the window between counting a waiter and its entering the wait. The clock of a variable
 * made with pthread_condattr_setclock is remembered from pthread_cond_init. */
#define COND_POLL_MS 10

struct cond_clock { struct cond_clock *next; pthread_cond_t *cond; clockid_t clock; };
static struct cond_clock *g_cond_clocks;   /* variables not on CLOCK_REALTIME; guarded by g_mu */

static clockid_t cond_clock_of(pthread_cond_t *cond) {
    clockid_t clock = CLOCK_REALTIME;
    pthread_mutex_lock(&g_mu);
    for (struct cond_clock *c = g_cond_clocks; c; c = c->next) if (c->cond == cond) clock = c->clock;
    pthread_mutex_unlock(&g_mu);
    return clock;
}

static void forget_cond(pthread_cond_t *cond) {
    for (struct cond_clock **p = &g_cond_clocks; *p; p = &(*p)->next) {
        if ((*p)->cond == cond) { struct cond_clock *gone = *p; *p = gone->next; free(gone); return; }
    }
}

int pthread_cond_init(pthread_cond_t *cond, const pthread_condattr_t *attr) {
    if (g_state == STATE_UNSET) init_once();
    int rc = real_cond_init(cond, attr);
    clockid_t clock = CLOCK_REALTIME;
    if (rc || !attr || pthread_condattr_getclock(attr, &clock) || clock == CLOCK_REALTIME) return rc;
    struct cond_clock *c = malloc(sizeof *c);
    if (!c) return rc;
    *c = (struct cond_clock){NULL, cond, clock};
    pthread_mutex_lock(&g_mu);
    forget_cond(cond);
    c->next = g_cond_clocks;
    g_cond_clocks = c;
    pthread_mutex_unlock(&g_mu);
    return rc;
}

int pthread_cond_destroy(pthread_cond_t *cond) {
    if (g_state == STATE_UNSET) init_once();
    pthread_mutex_lock(&g_mu);
    forget_cond(cond);
    pthread_mutex_unlock(&g_mu);
    return real_cond_destroy(cond);
}

static int cond_wait_sim(pthread_cond_t *cond, pthread_mutex_t *mutex, int64_t deadline) {
    clockid_t clock = real_cond_clockwait ? CLOCK_MONOTONIC : cond_clock_of(cond);
    if (atomic_load(&g_dead) && !t_dying) die();
    struct thread_rec *r = my_rec();
    reset_spin(r);
    if (deadline <= now_ns()) return ETIMEDOUT;
    begin_wait(r, deadline, NULL, 0, cond);
    int rc, woke_by = 0;
    for (;;) {
        struct timespec poll_at;   /* the wall-time safety net, on the variable's own clock for timedwait */
        real_clock_gettime(real_cond_clockwait ? CLOCK_MONOTONIC : clock, &poll_at);
        ns_ts(ts_ns(&poll_at) + COND_POLL_MS * 1000000LL, &poll_at);
        rc = real_cond_clockwait ? real_cond_clockwait(cond, mutex, CLOCK_MONOTONIC, &poll_at)
                                 : real_cond_timedwait(cond, mutex, &poll_at);
        pthread_mutex_lock(&g_mu);
        int woken = r->state == THREAD_WOKEN;
        woke_by = r->woke_by;
        pthread_mutex_unlock(&g_mu);
        if (woken || rc == 0 || atomic_load(&g_dead)) break;   /* ours, the program's signal, or the end */
        if (rc != ETIMEDOUT) break;                              /* EINVAL, EPERM: the caller's to see */
    }
    end_wait(r);
    if (atomic_load(&g_dead) && !t_dying) die();
    if (woke_by == WOKE_DEADLINE) return ETIMEDOUT;
    return rc == ETIMEDOUT ? 0 : rc;
}

int pthread_cond_wait(pthread_cond_t *cond, pthread_mutex_t *mutex) {
    if (!engaged()) return real_cond_wait(cond, mutex);
    return cond_wait_sim(cond, mutex, NO_DEADLINE);
}

static int cond_wait_until(pthread_cond_t *cond, pthread_mutex_t *mutex, clockid_t clock,
                           const struct timespec *abstime) {
    int kind = clock_kind(clock);
    if (!kind) return real_cond_timedwait(cond, mutex, abstime);
    if (!abstime || abstime->tv_nsec < 0 || abstime->tv_nsec >= NS_PER_S) return EINVAL;
    return cond_wait_sim(cond, mutex, ts_ns(abstime) - offset_of(kind));
}

int pthread_cond_timedwait(pthread_cond_t *cond, pthread_mutex_t *mutex, const struct timespec *abstime) {
    if (!engaged()) return real_cond_timedwait(cond, mutex, abstime);
    return cond_wait_until(cond, mutex, cond_clock_of(cond), abstime);
}

int pthread_cond_clockwait(pthread_cond_t *cond, pthread_mutex_t *mutex, clockid_t clock,
                           const struct timespec *abstime) {
    if (!engaged()) {
        if (real_cond_clockwait) return real_cond_clockwait(cond, mutex, clock, abstime);
        return clock == CLOCK_REALTIME ? real_cond_timedwait(cond, mutex, abstime) : EINVAL;
    }
    return cond_wait_until(cond, mutex, clock, abstime);
}

static void signal_waiters(pthread_cond_t *cond, int all) {
    pthread_mutex_lock(&g_mu);
    for (struct thread_rec *r = g_threads; r; r = r->next) {
        if (r->state != THREAD_ASLEEP || r->cond != cond) continue;
        r->woke_by = WOKE_SIGNAL;
        wake_rec(r);
        if (!all) break;
    }
    pthread_mutex_unlock(&g_mu);
}

int pthread_cond_signal(pthread_cond_t *cond) {
    if (engaged()) signal_waiters(cond, 0);
    return real_cond_signal(cond);
}

int pthread_cond_broadcast(pthread_cond_t *cond) {
    if (engaged()) signal_waiters(cond, 1);
    return real_cond_broadcast(cond);
}

/* --- start-up ----------------------------------------------------------------------------------------------------- */
static void *next_symbol(const char *name) {
    void *p = dlsym(RTLD_NEXT, name);
    if (!p) { say("hil time shim: %s not found behind the shim\n", name); _exit(EXIT_CLOCK_FAILED); }
    return p;
}

static void resolve(void) {
    real_clock_gettime = next_symbol("clock_gettime");
    real_gettimeofday = next_symbol("gettimeofday");
    real_time = next_symbol("time");
    real_timespec_get = next_symbol("timespec_get");
    real_nanosleep = next_symbol("nanosleep");
    real_clock_nanosleep = next_symbol("clock_nanosleep");
    real_usleep = next_symbol("usleep");
    real_sleep = next_symbol("sleep");
    real_poll = next_symbol("poll");
    real_ppoll = next_symbol("ppoll");
    real_select = next_symbol("select");
    real_pselect = next_symbol("pselect");
    real_epoll_wait = next_symbol("epoll_wait");
    real_epoll_pwait = next_symbol("epoll_pwait");
    real_pthread_create = next_symbol("pthread_create");
    real_pthread_join = next_symbol("pthread_join");
    real_cond_wait = next_symbol("pthread_cond_wait");
    real_cond_timedwait = next_symbol("pthread_cond_timedwait");
    real_cond_signal = next_symbol("pthread_cond_signal");
    real_cond_broadcast = next_symbol("pthread_cond_broadcast");
    real_cond_init = next_symbol("pthread_cond_init");
    real_cond_destroy = next_symbol("pthread_cond_destroy");
    real_cond_clockwait = dlsym(RTLD_NEXT, "pthread_cond_clockwait");
}

static void before_fork(void) { pthread_mutex_lock(&g_mu); }
static void after_fork_parent(void) { pthread_mutex_unlock(&g_mu); }
static void after_fork_child(void) {
    /* a forked child is another process: it must not talk on the parent's socket */
    pthread_mutex_init(&g_mu, NULL);
    if (g_sock >= 0) close(g_sock);
    g_sock = -1;
    g_state = STATE_CHILD;
}

static long env_long(const char *name, long fallback) {
    const char *text = getenv(name);
    return text && *text ? strtol(text, NULL, 10) : fallback;
}

static void read_spin_settings(void) {
    const char *text = getenv("HIL_CLOCK_SPIN");
    if (!text || !*text) return;
    long reads = 0, grace_ms = 50, quantum_us = 1000;
    if (sscanf(text, "%ld,%ld,%ld", &reads, &grace_ms, &quantum_us) < 1 || reads < 0 || grace_ms < 0 ||
        quantum_us <= 0)
        fatal("HIL_CLOCK_SPIN=%s: expected READS[,GRACE_MS[,QUANTUM_US]] (READS 0 turns spin detection off)", text);
    g_spin_reads = (unsigned long)reads;
    g_spin_grace_ns = grace_ms * 1000000LL;
    g_spin_quantum_ns = quantum_us * 1000LL;
}

static void engage(const char *fd_text) {
    char *end;
    long fd = strtol(fd_text, &end, 10);
    const char *endpoint = getenv("HIL_CLOCK_ENDPOINT");
    if (endpoint && *endpoint) snprintf(g_endpoint, sizeof g_endpoint, "%s", endpoint);
    if (*end || fd < 0 || fcntl((int)fd, F_GETFD) < 0)
        fatal("HIL_CLOCK_FD=%s is not an open descriptor: start the program with hil run --native", fd_text);
    g_sock = (int)fd;
    g_epoch_ns = env_long("HIL_CLOCK_EPOCH_NS", 0);
    g_io_grace_ns = env_long("HIL_CLOCK_IO_GRACE_MS", 20) * 1000000LL;
    struct timespec real, tai;
    real_clock_gettime(CLOCK_REALTIME, &real);
    real_clock_gettime(CLOCK_TAI, &tai);
    g_tai_ns = (ts_ns(&tai) - ts_ns(&real) + NS_PER_S / 2) / NS_PER_S * NS_PER_S;
    read_spin_settings();
    if (pthread_key_create(&g_key, thread_gone)) fatal("pthread_key_create failed");
    g_ctl_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (g_ctl_efd < 0) fatal("eventfd: %s", strerror(errno));
    pthread_atfork(before_fork, after_fork_parent, after_fork_child);
    struct reply rep;
    if (send_request(OP_HELLO, 0, 0) < 0) die();
    /* a program that exec'd itself keeps its pid and its socket: a reply its old image's clock thread waited for
     * may come first */
    for (int stale = 0; stale <= 4; stale++) {
        if (receive_reply(&rep) < 0) die();
        if (rep.kind == REPLY_WELCOME) break;
    }
    if (rep.kind != REPLY_WELCOME) fatal("unexpected reply %u to hello from the clock relay (%s)", rep.kind, g_endpoint);
    atomic_store(&g_now_ns, rep.now_ns);
    g_state = STATE_ENGAGED;
    my_rec();   /* the main thread counts from the start */
}

/* the inherited end of hil's socket pair, and not some other descriptor that happens to have its number */
static int is_clock_socket(long fd) {
    struct stat st;
    int type = 0;
    socklen_t len = sizeof type;
    struct sockaddr_storage addr;
    socklen_t addr_len = sizeof addr;
    return fd > 2 && fd < 1 << 20 && fstat((int)fd, &st) == 0 && S_ISSOCK(st.st_mode) &&
           getsockopt((int)fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 && type == SOCK_SEQPACKET &&
           getsockname((int)fd, (struct sockaddr *)&addr, &addr_len) == 0 && addr.ss_family == AF_UNIX;
}

static void init_once(void) {
    static atomic_flag started = ATOMIC_FLAG_INIT;
    if (atomic_flag_test_and_set(&started)) return;   /* constructors run on one thread; this is a guard only */
    resolve();
    g_pid = getpid();
    const char *fd_text = getenv("HIL_CLOCK_FD");
    if (!fd_text) { g_state = STATE_INERT; return; }
    const char *pid_text = getenv("HIL_CLOCK_PID");
    if (!pid_text || strtol(pid_text, NULL, 10) != (long)g_pid) {
        /* a child process of the program: leave the parent's socket alone, run on the wall clock */
        if (is_clock_socket(strtol(fd_text, NULL, 10))) close((int)strtol(fd_text, NULL, 10));
        g_state = STATE_CHILD;
        return;
    }
    engage(fd_text);
}

__attribute__((constructor)) static void hiltime_init(void) { init_once(); }

/* A native controller written against the bare serial line: raw Dynamixel Protocol 2.0 frames, a 50 Hz loop paced
 * with clock_nanosleep. It knows nothing of hil: it opens the port it is given, switches one servo's torque on,
 * and every tick writes a goal position (a triangle wave), reads the present position back and prints both.
 *
 *   cc -O2 -o commbot_neck examples/native/commbot_neck.c
 *   hil run --native --profile virtual --duration 5 -- ./commbot_neck {bus} 250
 *   ./commbot_neck /dev/ttyUSB0 250        # the same binary on the real robot, real time
 *
 * Arguments: PORT (default $HIL_BUS), TICKS (default 250 = 5 s), ID (default 30, the commbot's neck yaw).
 * On hil's simulated clock the run is deterministic: examples/native/commbot_neck.py does the same in Python and
 * gives the same trace (tests/test_native_clock.py). Output: "tick K t_ns T goal G present P".
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#define ADDR_TORQUE_ENABLE 64
#define ADDR_GOAL_POSITION 116
#define ADDR_PRESENT_POSITION 132
#define INST_READ 0x02
#define INST_WRITE 0x03
#define INST_STATUS 0x55
#define PERIOD_NS 20000000LL   /* 50 Hz */
#define REPLY_TIMEOUT_MS 100

static uint16_t crc16(const uint8_t *data, size_t n) {
    uint16_t crc = 0;
    for (size_t i = 0; i < n; i++) {
        crc ^= (uint16_t)data[i] << 8;
        for (int bit = 0; bit < 8; bit++) crc = (crc & 0x8000) ? (uint16_t)((crc << 1) ^ 0x8005) : (uint16_t)(crc << 1);
    }
    return crc;
}

/* header, ID, length, instruction, parameters (byte-stuffed: FF FF FD -> FF FF FD FD), CRC */
static size_t build_packet(uint8_t *out, uint8_t id, uint8_t instruction, const uint8_t *params, size_t n_params) {
    uint8_t body[64];
    size_t n = 0;
    body[n++] = instruction;
    for (size_t i = 0; i < n_params; i++) {
        body[n++] = params[i];
        if (n >= 3 && body[n - 1] == 0xFD && body[n - 2] == 0xFF && body[n - 3] == 0xFF) body[n++] = 0xFD;
    }
    size_t length = n + 2;
    size_t k = 0;
    out[k++] = 0xFF; out[k++] = 0xFF; out[k++] = 0xFD; out[k++] = 0x00;
    out[k++] = id; out[k++] = (uint8_t)(length & 0xFF); out[k++] = (uint8_t)(length >> 8);
    memcpy(out + k, body, n);
    k += n;
    uint16_t crc = crc16(out, k);
    out[k++] = (uint8_t)(crc & 0xFF);
    out[k++] = (uint8_t)(crc >> 8);
    return k;
}

static void fail(const char *what) {
    fprintf(stderr, "commbot_neck: %s\n", what);
    exit(1);
}

static void send_all(int fd, const uint8_t *data, size_t n) {
    while (n) {
        ssize_t w = write(fd, data, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) fail("write to the bus failed");
        data += w;
        n -= (size_t)w;
    }
}

/* Read one status packet from ``id``; its parameters go to ``params``. Returns the number of parameters. */
static size_t read_status(int fd, uint8_t id, uint8_t *params, size_t max_params) {
    uint8_t buf[256];
    size_t have = 0;
    for (;;) {
        /* a complete packet in the buffer? */
        for (size_t s = 0; s + 7 <= have; s++) {
            if (buf[s] != 0xFF || buf[s + 1] != 0xFF || buf[s + 2] != 0xFD || buf[s + 3] != 0x00) continue;
            size_t length = buf[s + 5] | (size_t)buf[s + 6] << 8;
            if (s + 7 + length > have) break;
            uint16_t crc = crc16(buf + s, 7 + length - 2);
            if ((crc & 0xFF) != buf[s + 5 + length] || (crc >> 8) != buf[s + 6 + length]) fail("CRC error in a reply");
            if (buf[s + 4] != id || buf[s + 7] != INST_STATUS) fail("a reply from another ID or not a status");
            if (buf[s + 8] != 0) fail("the servo reported an error");
            size_t n = length - 4;   /* instruction, error, CRC */
            if (n > max_params) n = max_params;
            memcpy(params, buf + s + 9, n);
            return n;
        }
        struct pollfd p = {fd, POLLIN, 0};
        int ready = poll(&p, 1, REPLY_TIMEOUT_MS);
        if (ready < 0 && errno == EINTR) continue;
        if (ready <= 0) fail("no reply within the timeout");
        ssize_t r = read(fd, buf + have, sizeof buf - have);
        if (r <= 0) fail("read from the bus failed");
        have += (size_t)r;
        if (have == sizeof buf) fail("garbage on the bus");
    }
}

static void write_u8(int fd, uint8_t id, uint16_t address, uint8_t value) {
    uint8_t params[3] = {(uint8_t)(address & 0xFF), (uint8_t)(address >> 8), value}, packet[64], reply[8];
    send_all(fd, packet, build_packet(packet, id, INST_WRITE, params, sizeof params));
    read_status(fd, id, reply, sizeof reply);
}

static void write_i32(int fd, uint8_t id, uint16_t address, int32_t value) {
    uint32_t v = (uint32_t)value;
    uint8_t params[6] = {(uint8_t)(address & 0xFF), (uint8_t)(address >> 8), (uint8_t)v, (uint8_t)(v >> 8),
                         (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    uint8_t packet[64], reply[8];
    send_all(fd, packet, build_packet(packet, id, INST_WRITE, params, sizeof params));
    read_status(fd, id, reply, sizeof reply);
}

static int32_t read_i32(int fd, uint8_t id, uint16_t address) {
    uint8_t params[4] = {(uint8_t)(address & 0xFF), (uint8_t)(address >> 8), 4, 0}, packet[64], reply[8];
    send_all(fd, packet, build_packet(packet, id, INST_READ, params, sizeof params));
    if (read_status(fd, id, reply, sizeof reply) != 4) fail("a read reply without 4 bytes");
    return (int32_t)((uint32_t)reply[0] | (uint32_t)reply[1] << 8 | (uint32_t)reply[2] << 16 | (uint32_t)reply[3] << 24);
}

/* the goal of tick k: a triangle wave of +-400 counts (+-35 degrees) around the centre, period 2 s */
static int32_t goal_at(int k) {
    int phase = k % 100;
    return 2048 + (phase < 50 ? phase : 100 - phase) * 16 - 400;
}

static long long mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

int main(int argc, char **argv) {
    const char *port = argc > 1 ? argv[1] : getenv("HIL_BUS");
    int ticks = argc > 2 ? atoi(argv[2]) : 250;
    uint8_t id = (uint8_t)(argc > 3 ? atoi(argv[3]) : 30);
    if (!port) fail("no port: give one, or run under hil run --native (HIL_BUS)");
    int fd = open(port, O_RDWR | O_NOCTTY);
    if (fd < 0) { perror(port); return 1; }
    struct termios tio;
    if (tcgetattr(fd, &tio) == 0) {   /* a serial line: raw bytes at 1 Mbaud (a pty ignores the speed) */
        cfmakeraw(&tio);
        cfsetspeed(&tio, B1000000);
        tcsetattr(fd, TCSANOW, &tio);
    }
    write_u8(fd, id, ADDR_TORQUE_ENABLE, 1);
    long long start = mono_ns();
    for (int k = 0; k < ticks; k++) {
        int32_t goal = goal_at(k);
        write_i32(fd, id, ADDR_GOAL_POSITION, goal);
        int32_t present = read_i32(fd, id, ADDR_PRESENT_POSITION);
        printf("tick %d t_ns %lld goal %d present %d\n", k, mono_ns() - start, goal, present);
        long long next = start + (k + 1) * PERIOD_NS;
        struct timespec at = {next / 1000000000LL, next % 1000000000LL};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &at, NULL) == EINTR) {}
    }
    close(fd);
    return 0;
}

// tail-probe: how steady this machine is for work shaped like one `hybrid-sim bench` sign-in.
//
// One thread does, per "sign-in": two TCP connects to a loopback listener and their two accepts,
// seven 64-byte messages relayed between the two accepted sockets (client → relay → other client
// and back, one read and one write per hop, as the relay does), four closes, a chase through an
// 8 MiB heap where each address depends on the byte read before (as code that follows object
// references does), and a fixed arithmetic loop (the cryptography's stand-in). No Swift, no
// SwiftNIO, no allocation in the loop. It times runs of N such sign-ins as `bench --count N`
// does and prints, per run, p50, p99, p99 ÷ p50 and its slow stretches (windows of 20 consecutive
// sign-ins whose median is at least 1.25 × the run's p50) as one JSON line, so the tail it reports
// is the machine's own for work of this shape: a yardstick for `bench`'s tail, not a bound.
//
//   cc -O2 -o tail-probe tail-probe.c
//   ./tail-probe [runs] [count] [alu-iterations] [memory-touches]
//
// Defaults: 3 runs of 200 sign-ins, 300,000 arithmetic steps (about 0.5 ms here, the crypto floor)
// and 6,000 dependent touches (about 0.7 ms): with the sockets' 0.14 ms, about a sign-in's 1.4 ms. Docs/BENCHMARKS.md, "Round 9". An experiment, not part of HybridSim.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void die(const char *what) {
    perror(what);
    exit(2);
}

static int connected(const struct sockaddr_in *address) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) die("socket");
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (const struct sockaddr *)address, sizeof *address) != 0) die("connect");
    return fd;
}

static int accepted(int listener) {
    int fd = accept(listener, NULL, NULL);
    if (fd < 0) die("accept");
    int one = 1;  // as SwiftNIO sets on the connections it accepts
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void move(int from, int to, char *message) {
    // Whole 64-byte messages on loopback: one read, one write, checked.
    if (read(from, message, 64) != 64) die("read");
    if (write(to, message, 64) != 64) die("write");
}

int main(int argc, char **argv) {
    int runs = argc > 1 ? atoi(argv[1]) : 3;
    int count = argc > 2 ? atoi(argv[2]) : 200;
    long alu = argc > 3 ? atol(argv[3]) : 300000;
    int touches = argc > 4 ? atoi(argv[4]) : 6000;
    if (runs < 1 || count < 2 || alu < 0 || touches < 0) {
        fprintf(stderr, "usage: tail-probe [runs>0] [count>1] [alu-iterations>=0] [memory-touches>=0]\n");
        return 64;
    }

    int listener = socket(AF_INET, SOCK_STREAM, 0);
    if (listener < 0) die("socket");
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t length = sizeof address;
    if (bind(listener, (struct sockaddr *)&address, sizeof address) != 0) die("bind");
    if (listen(listener, 16) != 0) die("listen");
    if (getsockname(listener, (struct sockaddr *)&address, &length) != 0) die("getsockname");

    size_t heap = 8u << 20;
    unsigned char *memory = malloc(heap);
    if (!memory) die("malloc");
    memset(memory, 1, heap);
    double *samples = malloc(sizeof(double) * count), *sorted = malloc(sizeof(double) * count);
    if (!samples || !sorted) die("malloc");
    unsigned state = 1;
    volatile unsigned sink = 0;
    char message[64] = {0};

    for (int run = 0; run < runs; run++) {
        for (int i = 0; i < count; i++) {
            double start = now();
            int phone = connected(&address);
            int phoneSide = accepted(listener);
            int desktop = connected(&address);
            int desktopSide = accepted(listener);
            for (int m = 0; m < 7; m++) {
                int sender = m % 2 ? phone : desktop, receiver = m % 2 ? desktop : phone;
                int inbound = m % 2 ? phoneSide : desktopSide, outbound = m % 2 ? desktopSide : phoneSide;
                if (write(sender, message, 64) != 64) die("write");
                move(inbound, outbound, message);
                if (read(receiver, message, 64) != 64) die("read");
            }
            for (int t = 0; t < touches; t++) {
                // Each address depends on the byte read before it: a chase, as through objects.
                state = state * 1103515245u + 12345u + memory[(state >> 4) % heap];
            }
            for (long k = 0; k < alu; k++) {
                state = state * 1103515245u + 12345u;
                sink += state >> 7;
            }
            close(phone);
            close(desktop);
            close(phoneSide);
            close(desktopSide);
            samples[i] = now() - start;
        }
        memcpy(sorted, samples, sizeof(double) * count);
        qsort(sorted, count, sizeof(double), compare);
        // Nearest rank, as `bench` reports: the sample at rank ⌈p/100 · n⌉.
        double p50 = sorted[(count * 50 + 99) / 100 - 1];
        double p99 = sorted[(count * 99 + 99) / 100 - 1];
        int slowWindows = 0;
        for (int w = 0; w + 20 <= count; w += 20) {
            double window[20];
            memcpy(window, samples + w, sizeof window);
            qsort(window, 20, sizeof(double), compare);
            if (window[9] >= 1.25 * p50) slowWindows++;
        }
        printf("{\"run\":%d,\"count\":%d,\"p50Milliseconds\":%.4f,\"p99Milliseconds\":%.4f,\"p99OverP50\":%.3f,"
               "\"slowWindows\":%d}\n",
               run + 1, count, p50 * 1e3, p99 * 1e3, p99 / p50, slowWindows);
        fflush(stdout);
    }
    return 0;
}

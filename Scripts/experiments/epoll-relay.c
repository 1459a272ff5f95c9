/*
 * epoll-relay: an EXPERIMENT, not part of HybridSim. It answers one question for issue 9's owner:
 * how much CPU per relayed message does the smallest possible relay need on this machine, with no
 * SwiftNIO and no Swift concurrency at all? It speaks just enough of the relay contract
 * (../../../shared/docs/CONTRACT.md) for `hybrid-sim bench relay` to drive it:
 *
 *   GET /cable/new/{TUNNEL_ID}             -> 101, Sec-WebSocket-Protocol: fido.cable,
 *                                             X-caBLE-Routing-ID: 000000
 *   GET /cable/connect/000000/{TUNNEL_ID}  -> 101 (404 if the tunnel is unknown)
 *
 * then forwards each binary or continuation frame (masked from a client) unmasked to the other
 * side, and on a close frame from either side sends a close frame to both and closes both.
 *
 * It is deliberately unsafe for anything but loopback measurement: no limits, no timeouts, no
 * Origin check, no partial-write queue (a short write aborts the process), one thread, a fixed
 * 16,384-slot tunnel table. Build and run (Scripts/experiments/README.md):
 *
 *   cc -O2 -o /tmp/epoll-relay Scripts/experiments/epoll-relay.c -lcrypto
 *   /tmp/epoll-relay            # prints "listening on 127.0.0.1:PORT"
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_FDS 65536
#define TABLE 16384
#define BUF 4096

typedef struct Slot Slot;

typedef struct Conn {
    int fd;
    int open;            /* 1 once upgraded */
    struct Conn *peer;
    Slot *waiting;       /* the tunnel slot this creator waits in until someone joins */
    size_t used;
    uint8_t in[BUF];
} Conn;

struct Slot { char id[33]; Conn *phone; };

static Conn *conns[MAX_FDS];
static Slot table[TABLE];
static int ep;

static void die(const char *what) { perror(what); exit(1); }

static unsigned hash(const char *id) {
    unsigned h = 2166136261u;
    for (int i = 0; i < 32; i++) h = (h ^ (uint8_t)id[i]) * 16777619u;
    return h & (TABLE - 1);
}

static Slot *slot(const char *id, int create) {
    for (unsigned i = hash(id), n = 0; n < TABLE; i = (i + 1) & (TABLE - 1), n++) {
        if (table[i].id[0] == 0) {
            if (!create) return NULL;
            memcpy(table[i].id, id, 32);
            table[i].id[32] = 0;
            return &table[i];
        }
        if (memcmp(table[i].id, id, 32) == 0) return &table[i];
    }
    return NULL;
}

static void send_all(int fd, const void *bytes, size_t count) {
    ssize_t n = write(fd, bytes, count);
    if (n != (ssize_t)count) { fprintf(stderr, "short write (%zd of %zu)\n", n, count); exit(1); }
}

static void drop(Conn *c) {
    if (!c) return;
    if (c->waiting) c->waiting->phone = NULL; /* a creator gone before the join leaves no dangling slot */
    conns[c->fd] = NULL;
    close(c->fd);
    free(c);
}

static void close_tunnel(Conn *c) {
    static const uint8_t close_frame[] = {0x88, 0x02, 0x03, 0xE8};
    Conn *p = c->peer;
    if (p) { p->peer = NULL; send_all(p->fd, close_frame, sizeof close_frame); drop(p); }
    if (c->open) write(c->fd, close_frame, sizeof close_frame);
    drop(c);
}

static const char *header(const char *head, const char *name) {
    const char *at = strcasestr(head, name);
    return at ? at + strlen(name) : NULL;
}

/* Returns 0 if the head is incomplete, -1 to drop, 1 when upgraded (bytes after the head stay). */
static int upgrade(Conn *c) {
    uint8_t *end = memmem(c->in, c->used, "\r\n\r\n", 4);
    if (!end) return c->used == BUF ? -1 : 0;
    size_t head_len = (size_t)(end - c->in) + 4;
    char head[BUF + 1];
    memcpy(head, c->in, head_len);
    head[head_len] = 0;

    const char *key = header(head, "\r\nSec-WebSocket-Key: ");
    if (!key) return -1;
    char material[128];
    size_t key_len = strcspn(key, "\r");
    if (key_len > 60) return -1;
    snprintf(material, sizeof material, "%.*s258EAFA5-E914-47DA-95CA-C5AB0DC85B11", (int)key_len, key);
    uint8_t digest[SHA_DIGEST_LENGTH];
    SHA1((const uint8_t *)material, strlen(material), digest);
    char accept[64];
    EVP_EncodeBlock((uint8_t *)accept, digest, SHA_DIGEST_LENGTH);

    char reply[512];
    int reply_len;
    if (strncmp(head, "GET /cable/new/", 15) == 0) {
        Slot *s = slot(head + 15, 1);
        if (!s || s->phone) return -1;
        s->phone = c;
        c->waiting = s;
        reply_len = snprintf(reply, sizeof reply,
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: fido.cable\r\n"
            "X-caBLE-Routing-ID: 000000\r\n\r\n", accept);
    } else if (strncmp(head, "GET /cable/connect/000000/", 26) == 0) {
        Slot *s = slot(head + 26, 0);
        if (!s || !s->phone) {
            static const char missing[] = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
            write(c->fd, missing, sizeof missing - 1);
            return -1;
        }
        c->peer = s->phone;
        s->phone->peer = c;
        s->phone->waiting = NULL;
        s->phone = NULL;
        /* The slot keeps its ID (no deletion from the probe chains): restart between runs. */
        reply_len = snprintf(reply, sizeof reply,
            "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            "Sec-WebSocket-Accept: %s\r\nSec-WebSocket-Protocol: fido.cable\r\n\r\n", accept);
    } else {
        return -1;
    }
    send_all(c->fd, reply, (size_t)reply_len);
    c->open = 1;
    memmove(c->in, c->in + head_len, c->used - head_len);
    c->used -= head_len;
    return 1;
}

/* Forwards every complete frame in c->in; returns -1 when the tunnel ends. */
static int forward(Conn *c) {
    size_t at = 0;
    while (c->used - at >= 6) {
        uint8_t *f = c->in + at;
        uint8_t opcode = f[0] & 0x0F;
        size_t length = f[1] & 0x7F, header_len = 2;
        if (!(f[1] & 0x80)) return -1; /* client frames are masked */
        if (length == 126) {
            if (c->used - at < 8) break;
            length = ((size_t)f[2] << 8) | f[3];
            header_len = 4;
        } else if (length == 127) {
            return -1;
        }
        if (c->used - at < header_len + 4 + length) break;
        uint8_t *mask = f + header_len, *payload = mask + 4;
        if (opcode == 0x8) return -1;
        if (opcode == 0x0 || opcode == 0x2) {
            if (!c->peer) return -1;
            uint8_t out[BUF + 4];
            size_t out_len = 0;
            out[out_len++] = f[0];
            if (length < 126) out[out_len++] = (uint8_t)length;
            else { out[out_len++] = 126; out[out_len++] = (uint8_t)(length >> 8); out[out_len++] = (uint8_t)length; }
            for (size_t i = 0; i < length; i++) out[out_len + i] = payload[i] ^ mask[i & 3];
            send_all(c->peer->fd, out, out_len + length);
        }
        at += header_len + 4 + length;
    }
    memmove(c->in, c->in + at, c->used - at);
    c->used -= at;
    return 0;
}

int main(int argc, char **argv) {
    int port = argc > 1 ? atoi(argv[1]) : 0;
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(listener, (struct sockaddr *)&address, sizeof address) < 0) die("bind");
    if (listen(listener, 4096) < 0) die("listen");
    socklen_t length = sizeof address;
    getsockname(listener, (struct sockaddr *)&address, &length);
    printf("listening on 127.0.0.1:%d\n", ntohs(address.sin_port));
    fflush(stdout);

    ep = epoll_create1(0);
    struct epoll_event event = {.events = EPOLLIN, .data.fd = listener};
    epoll_ctl(ep, EPOLL_CTL_ADD, listener, &event);
    struct epoll_event ready[256];
    for (;;) {
        int n = epoll_wait(ep, ready, 256, -1);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) die("epoll_wait");
        for (int i = 0; i < n; i++) {
            int fd = ready[i].data.fd;
            if (fd == listener) {
                int client;
                while ((client = accept4(listener, NULL, NULL, SOCK_NONBLOCK)) >= 0 || errno == EINTR) {
                    if (client < 0) continue;
                    if (client >= MAX_FDS) { close(client); continue; }
                    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    Conn *c = calloc(1, sizeof *c);
                    c->fd = client;
                    conns[client] = c;
                    struct epoll_event e = {.events = EPOLLIN, .data.fd = client};
                    epoll_ctl(ep, EPOLL_CTL_ADD, client, &e);
                }
                /* Out of descriptors (EMFILE) would make the level-triggered listener spin: stop loudly. */
                if (errno != EAGAIN && errno != EWOULDBLOCK) die("accept4");
                continue;
            }
            Conn *c = conns[fd];
            if (!c) continue;
            if (c->used == BUF) { /* a head or frame larger than the buffer: this relay does not take it */
                fprintf(stderr, "a request head or frame over %d bytes; closing the tunnel\n", BUF);
                close_tunnel(c);
                continue;
            }
            ssize_t got = read(fd, c->in + c->used, BUF - c->used);
            if (got <= 0) {
                if (got < 0 && errno == EAGAIN) continue;
                close_tunnel(c);
                continue;
            }
            c->used += (size_t)got;
            int state = c->open ? 0 : upgrade(c);
            if (state < 0 || (c->open && forward(c) < 0)) close_tunnel(c);
        }
    }
}

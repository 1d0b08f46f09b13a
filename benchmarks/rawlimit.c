/*
 * rawlimit: what this machine's loopback can do without any JGroups, the yardstick of benchmarks/e2e.py.
 *
 *   rawlimit stream [--size 1024] [--count 1000000] [--batch 64] [--mcast 232.x.y.z:port]
 *       one thread blasts datagrams with sendmmsg(), another receives them with recvmmsg(); reports the
 *       receiver's rate between its first and last datagram (the kernel drops what the socket cannot hold,
 *       so "received" may be below "sent") and the sender's rate.
 *   rawlimit rtt [--size 100] [--count 20000] [--warmup 2000]
 *       two threads ping-pong one datagram (sendto/recv, blocking); reports round-trip percentiles.
 *
 * Output: one JSON line on stdout. Loopback only (127.0.0.1; multicast with IP_MULTICAST_IF 127.0.0.1, TTL 0).
 * Built by `make bench` into build/rawlimit (cc -O2 -pthread).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#define MAX_BATCH 256
#define MAX_SIZE 65507

static long opt_size = -1, opt_count = -1, opt_batch = 64, opt_warmup = 2000;
static const char *opt_mcast = NULL;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what) {
    fprintf(stderr, "rawlimit: %s: %s\n", what, strerror(errno));
    exit(1);
}

static int udp_socket(int rcvbuf) {
    int s = socket(AF_INET, SOCK_DGRAM, 0);
    if (s < 0) die("socket");
    if (rcvbuf > 0) {
        /* as much as the kernel allows (FORCE needs CAP_NET_ADMIN; the plain call is capped at rmem_max) */
        if (setsockopt(s, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof rcvbuf) < 0)
            setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    }
    return s;
}

static void bind_loopback(int s, uint16_t port) {
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(s, (struct sockaddr *)&a, sizeof a) < 0) die("bind");
}

/* ------------------------------------------------------------------------------------------ stream */

struct stream {
    int tx, rx;
    struct sockaddr_in dest;
    long sent;
    double send_start, send_end;
    volatile int sender_done;
};

static void *sender(void *arg) {
    struct stream *st = arg;
    static char buf[MAX_SIZE];
    struct mmsghdr msgs[MAX_BATCH];
    struct iovec iov[MAX_BATCH];
    memset(buf, 'r', sizeof buf);
    for (int i = 0; i < opt_batch; i++) {
        iov[i].iov_base = buf;
        iov[i].iov_len = (size_t)opt_size;
        memset(&msgs[i], 0, sizeof msgs[i]);
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
        msgs[i].msg_hdr.msg_name = &st->dest;
        msgs[i].msg_hdr.msg_namelen = sizeof st->dest;
    }
    st->send_start = now_s();
    long sent = 0;
    while (sent < opt_count) {
        int n = (int)(opt_count - sent < opt_batch ? opt_count - sent : opt_batch);
        int r = sendmmsg(st->tx, msgs, (unsigned)n, 0);
        if (r < 0) {
            if (errno == EINTR || errno == ENOBUFS || errno == EAGAIN) continue;
            die("sendmmsg");
        }
        sent += r;
    }
    st->send_end = now_s();
    st->sent = sent;
    st->sender_done = 1;
    return NULL;
}

static int run_stream(void) {
    if (opt_size < 0) opt_size = 1024;
    if (opt_count < 0) opt_count = 1000000;
    if (opt_size < 1 || opt_size > MAX_SIZE || opt_batch < 1 || opt_batch > MAX_BATCH) {
        fprintf(stderr, "rawlimit: --size 1..%d, --batch 1..%d\n", MAX_SIZE, MAX_BATCH);
        return 2;
    }
    struct stream st = {0};
    st.rx = udp_socket(25 << 20);
    st.tx = udp_socket(0);
    int sndbuf = 640 << 10;
    setsockopt(st.tx, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof sndbuf);
    if (opt_mcast) {
        char addr[64];
        const char *colon = strrchr(opt_mcast, ':');
        if (!colon || colon - opt_mcast >= (long)sizeof addr) {
            fprintf(stderr, "rawlimit: --mcast ADDR:PORT\n");
            return 2;
        }
        memcpy(addr, opt_mcast, (size_t)(colon - opt_mcast));
        addr[colon - opt_mcast] = 0;
        uint16_t port = (uint16_t)atoi(colon + 1);
        int one = 1;
        setsockopt(st.rx, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        struct sockaddr_in b = {.sin_family = AF_INET, .sin_port = htons(port)};
        if (inet_pton(AF_INET, addr, &b.sin_addr) != 1) {
            fprintf(stderr, "rawlimit: bad multicast address %s\n", addr);
            return 2;
        }
        if (bind(st.rx, (struct sockaddr *)&b, sizeof b) < 0) die("bind (multicast)");
        struct ip_mreq mreq;
        mreq.imr_multiaddr = b.sin_addr;
        mreq.imr_interface.s_addr = htonl(INADDR_LOOPBACK);
        if (setsockopt(st.rx, IPPROTO_IP, IP_ADD_MEMBERSHIP, &mreq, sizeof mreq) < 0) die("IP_ADD_MEMBERSHIP");
        struct in_addr ifa = {.s_addr = htonl(INADDR_LOOPBACK)};
        if (setsockopt(st.tx, IPPROTO_IP, IP_MULTICAST_IF, &ifa, sizeof ifa) < 0) die("IP_MULTICAST_IF");
        unsigned char ttl = 0, loop = 1;
        setsockopt(st.tx, IPPROTO_IP, IP_MULTICAST_TTL, &ttl, sizeof ttl);
        setsockopt(st.tx, IPPROTO_IP, IP_MULTICAST_LOOP, &loop, sizeof loop);
        bind_loopback(st.tx, 0);
        st.dest = b;
    } else {
        bind_loopback(st.rx, 0);
        bind_loopback(st.tx, 0);
        socklen_t len = sizeof st.dest;
        if (getsockname(st.rx, (struct sockaddr *)&st.dest, &len) < 0) die("getsockname");
    }
    struct timeval tv = {.tv_sec = 0, .tv_usec = 300000};     /* the receiver gives up 300 ms after the last */
    setsockopt(st.rx, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

    static char rbufs[MAX_BATCH][MAX_SIZE + 1];
    struct mmsghdr msgs[MAX_BATCH];
    struct iovec iov[MAX_BATCH];
    for (int i = 0; i < MAX_BATCH; i++) {
        iov[i].iov_base = rbufs[i];
        iov[i].iov_len = sizeof rbufs[i];
        memset(&msgs[i], 0, sizeof msgs[i]);
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    pthread_t t;
    if (pthread_create(&t, NULL, sender, &st) != 0) die("pthread_create");
    long received = 0, batches = 0;
    double first = 0, last = 0;
    while (received < opt_count) {
        int r = recvmmsg(st.rx, msgs, MAX_BATCH, 0, NULL);
        if (r < 0) {
            if (errno == EINTR) continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (st.sender_done) break;             /* idle after the sender finished: the rest is lost */
                continue;
            }
            die("recvmmsg");
        }
        double now = now_s();
        if (received == 0) first = now;
        last = now;
        received += r;
        batches++;
    }
    pthread_join(t, NULL);
    double secs = last - first, ssecs = st.send_end - st.send_start;
    double rate = secs > 0 ? (received - 1) / secs : 0, srate = ssecs > 0 ? st.sent / ssecs : 0;
    printf("{\"mode\":\"stream\",\"transport\":\"%s\",\"size\":%ld,\"count\":%ld,\"batch\":%ld,\"sent\":%ld,"
           "\"received\":%ld,\"received_share\":%.4f,\"seconds\":%.6f,\"datagrams_per_s\":%.1f,\"mb_per_s\":%.2f,"
           "\"send_seconds\":%.6f,\"send_datagrams_per_s\":%.1f,\"datagrams_per_recvmmsg\":%.2f}\n",
           opt_mcast ? "multicast" : "unicast", opt_size, opt_count, opt_batch, st.sent, received,
           st.sent ? (double)received / st.sent : 0, secs, rate, rate * opt_size / 1e6, ssecs, srate,
           batches ? (double)received / batches : 0);
    return 0;
}

/* --------------------------------------------------------------------------------------------- rtt */

struct pong {
    int s;
    long rounds;
};

static void *responder(void *arg) {
    struct pong *p = arg;
    static char buf[MAX_SIZE];
    struct sockaddr_in from;
    for (long i = 0; i < p->rounds; i++) {
        socklen_t fl = sizeof from;
        ssize_t n = recvfrom(p->s, buf, sizeof buf, 0, (struct sockaddr *)&from, &fl);
        if (n < 0) {
            if (errno == EINTR) { i--; continue; }
            die("recvfrom (responder)");
        }
        if (sendto(p->s, buf, (size_t)n, 0, (struct sockaddr *)&from, fl) < 0) die("sendto (responder)");
    }
    return NULL;
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double quantile(const int64_t *v, long n, double q) {      /* nearest rank, as the members do */
    double x = q * (double)n;
    long idx = (long)x;
    if ((double)idx < x) idx++;                 /* ceil without libm */
    idx -= 1;
    if (idx < 0) idx = 0;
    if (idx > n - 1) idx = n - 1;
    return (double)v[idx];
}

static int run_rtt(void) {
    if (opt_size < 0) opt_size = 100;
    if (opt_count < 0) opt_count = 20000;
    if (opt_size < 1 || opt_size > MAX_SIZE || opt_count < 1) {
        fprintf(stderr, "rawlimit: --size 1..%d, --count >= 1\n", MAX_SIZE);
        return 2;
    }
    int a = udp_socket(0), b = udp_socket(0);
    bind_loopback(a, 0);
    bind_loopback(b, 0);
    struct sockaddr_in bd;
    socklen_t len = sizeof bd;
    if (getsockname(b, (struct sockaddr *)&bd, &len) < 0) die("getsockname");
    struct pong p = {.s = b, .rounds = opt_count + opt_warmup};
    pthread_t t;
    if (pthread_create(&t, NULL, responder, &p) != 0) die("pthread_create");
    static char buf[MAX_SIZE];
    memset(buf, 'q', sizeof buf);
    int64_t *rtt = malloc(sizeof(int64_t) * (size_t)opt_count);
    if (!rtt) die("malloc");
    for (long i = 0; i < opt_count + opt_warmup; i++) {
        int64_t t0 = now_ns();
        if (sendto(a, buf, (size_t)opt_size, 0, (struct sockaddr *)&bd, sizeof bd) < 0) die("sendto");
        for (;;) {
            ssize_t n = recv(a, buf, sizeof buf, 0);
            if (n >= 0) break;
            if (errno != EINTR) die("recv");
        }
        int64_t dt = now_ns() - t0;
        if (i >= opt_warmup) rtt[i - opt_warmup] = dt;
    }
    pthread_join(t, NULL);
    qsort(rtt, (size_t)opt_count, sizeof rtt[0], cmp64);
    double sum = 0;
    for (long i = 0; i < opt_count; i++) sum += (double)rtt[i];
    printf("{\"mode\":\"rtt\",\"size\":%ld,\"n\":%ld,\"min_us\":%.3f,\"median_us\":%.3f,\"p90_us\":%.3f,"
           "\"p99_us\":%.3f,\"p999_us\":%.3f,\"max_us\":%.3f,\"mean_us\":%.3f,\"cdf_us\":[",
           opt_size, opt_count, rtt[0] / 1e3, quantile(rtt, opt_count, 0.5) / 1e3,
           quantile(rtt, opt_count, 0.9) / 1e3, quantile(rtt, opt_count, 0.99) / 1e3,
           quantile(rtt, opt_count, 0.999) / 1e3, rtt[opt_count - 1] / 1e3, sum / opt_count / 1e3);
    for (int i = 0; i <= 1000; i++)
        printf("%s%.1f", i ? "," : "", quantile(rtt, opt_count, i / 1000.0) / 1e3);
    printf("]}\n");
    free(rtt);
    return 0;
}

static int usage(void) {
    fprintf(stderr, "usage: rawlimit stream [--size N] [--count N] [--batch N] [--mcast ADDR:PORT]\n"
                    "       rawlimit rtt [--size N] [--count N] [--warmup N]\n");
    return 2;
}

int main(int argc, char **argv) {
    if (argc < 2) return usage();
    for (int i = 2; i < argc; i++) {
        if (i + 1 >= argc) return usage();
        const char *k = argv[i], *v = argv[++i];
        if (!strcmp(k, "--size")) opt_size = atol(v);
        else if (!strcmp(k, "--count")) opt_count = atol(v);
        else if (!strcmp(k, "--batch")) opt_batch = atol(v);
        else if (!strcmp(k, "--warmup")) opt_warmup = atol(v);
        else if (!strcmp(k, "--mcast")) opt_mcast = v;
        else return usage();
    }
    if (!strcmp(argv[1], "stream")) return run_stream();
    if (!strcmp(argv[1], "rtt")) return run_rtt();
    return usage();
}

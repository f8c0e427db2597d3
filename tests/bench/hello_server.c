/* SPDX-License-Identifier: Apache-2.0 */
/*
 * mgbench-hello: the trivial HTTP/1.1 endpoint of mgbench's overhead check
 * (issue 3: "a hello workload hits a trivial endpoint; the README states
 * mgbench's rate next to wrk's on the same endpoint"). Every request head
 * (bodies are not supported) gets a fixed 200 "hello\n" on a keep-alive
 * connection. N threads, each with its own epoll loop and SO_REUSEPORT
 * listener, level-triggered reads; no allocation per request.
 *
 * usage: mgbench-hello [--port P] [--threads N]   (port 0: pick one; the port is printed)
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAX_CONNS 65536
#define BUF_BYTES 16384

static const char response[] = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n"
                               "Content-Length: 6\r\n\r\nhello\n";

struct hconn {
    int fd;
    unsigned match; /* bytes of "\r\n\r\n" matched so far */
};

static int listen_port(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 1024) != 0) {
        perror("mgbench-hello: bind/listen");
        exit(1);
    }
    return fd;
}

/* Count complete request heads in buf (state carried in c->match). */
static unsigned heads(struct hconn *c, const char *buf, size_t n)
{
    static const char end[] = "\r\n\r\n";
    unsigned count = 0;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == end[c->match])
            c->match++;
        else
            c->match = buf[i] == '\r' ? 1 : 0;
        if (c->match == 4) {
            count++;
            c->match = 0;
        }
    }
    return count;
}

static void serve_readable(struct hconn *c, char *buf, char *out)
{
    for (;;) {
        ssize_t n = read(c->fd, buf, BUF_BYTES);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        if (n <= 0) {
            close(c->fd);
            c->fd = -1;
            return;
        }
        unsigned k = heads(c, buf, (size_t)n);
        size_t len = 0;
        for (unsigned i = 0; i < k; i++) {
            if (len + sizeof(response) - 1 > BUF_BYTES) {
                if (write(c->fd, out, len) < 0)
                    break;
                len = 0;
            }
            memcpy(out + len, response, sizeof(response) - 1);
            len += sizeof(response) - 1;
        }
        if (len && write(c->fd, out, len) != (ssize_t)len) {
            close(c->fd); /* a blocked hello client is not worth buffering for */
            c->fd = -1;
            return;
        }
        if ((size_t)n < BUF_BYTES)
            return;
    }
}

static void *serve(void *arg)
{
    int lfd = listen_port(*(int *)arg);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    epoll_ctl(ep, EPOLL_CTL_ADD, lfd, &ev);
    struct epoll_event evs[256];
    char *buf = malloc(BUF_BYTES), *out = malloc(BUF_BYTES);
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            struct hconn *c = evs[i].data.ptr;
            if (!c) {
                int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
                if (fd < 0)
                    continue;
                int one = 1;
                setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
                c = calloc(1, sizeof(*c));
                c->fd = fd;
                struct epoll_event cev = {.events = EPOLLIN, .data.ptr = c};
                epoll_ctl(ep, EPOLL_CTL_ADD, fd, &cev);
                continue;
            }
            serve_readable(c, buf, out);
            if (c->fd < 0)
                free(c);
        }
    }
    return NULL;
}

int main(int argc, char **argv)
{
    int port = 0, threads = 1;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port") == 0)
            port = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--threads") == 0)
            threads = atoi(argv[i + 1]);
    }
    signal(SIGPIPE, SIG_IGN);
    if (port == 0) { /* find a free port, then let every thread bind it with SO_REUSEPORT */
        int fd = listen_port(0);
        struct sockaddr_in sa;
        socklen_t sl = sizeof(sa);
        getsockname(fd, (struct sockaddr *)&sa, &sl);
        port = ntohs(sa.sin_port);
        close(fd);
    }
    printf("mgbench-hello listening on 127.0.0.1:%d threads %d\n", port, threads);
    fflush(stdout);
    pthread_t tid;
    for (int i = 1; i < threads; i++)
        pthread_create(&tid, NULL, serve, &port);
    serve(&port);
    return 0;
}

# Socket declarations and helpers shared by the UDP core modules (recvloop, relay, bundler, senders) and tcp.

from libc.stdint cimport uint16_t, uint32_t
from posix.uio cimport iovec
from posix.time cimport timespec


cdef extern from "<sys/socket.h>" nogil:
    ctypedef unsigned int socklen_t
    ctypedef unsigned short sa_family_t

    struct sockaddr:
        sa_family_t sa_family

    struct sockaddr_storage:
        sa_family_t ss_family

    struct msghdr:
        void* msg_name
        socklen_t msg_namelen
        iovec* msg_iov
        size_t msg_iovlen
        void* msg_control
        size_t msg_controllen
        int msg_flags

    struct mmsghdr:
        msghdr msg_hdr
        unsigned int msg_len

    int recvmmsg(int fd, mmsghdr* vmessages, unsigned int vlen, int flags, timespec* tmo)
    int sendmmsg(int fd, mmsghdr* vmessages, unsigned int vlen, int flags)
    ssize_t c_sendto "sendto" (int fd, const void* buf, size_t n, int flags, const sockaddr* addr, socklen_t alen)

    enum:
        AF_INET
        AF_INET6
        MSG_DONTWAIT
        MSG_TRUNC
        SOCK_DGRAM
        SOCK_STREAM


cdef extern from "<poll.h>" nogil:
    struct pollfd:
        int fd
        short events
        short revents

    ctypedef unsigned long nfds_t
    int poll(pollfd* fds, nfds_t nfds, int timeout)

    enum:
        POLLIN
        POLLOUT
        POLLERR
        POLLHUP
        POLLNVAL


cdef enum:
    MAX_UDP_DATAGRAM = 65507    # largest UDP payload over IPv4 (65535 - 8 byte UDP header - 20 byte IP header)
    MAX_VLEN = 1024             # the kernel caps the vector length of recvmmsg/sendmmsg (UIO_MAXIOV)
    POLLOUT_MS = 10             # a sender waits this long for POLLOUT before re-checking whether to give up


cdef inline int wait_writable(int fd, int timeout_ms) noexcept nogil:
    """poll() for POLLOUT; returns -1 if the descriptor is no longer valid."""
    cdef pollfd p
    p.fd = fd
    p.events = POLLOUT
    p.revents = 0
    if poll(&p, 1, timeout_ms) > 0 and (p.revents & POLLNVAL):
        return -1
    return 0


cdef int sock_fd(object sock, int kind) except -1
cdef int fill_sockaddr(object sock, object dest, sockaddr_storage* out, socklen_t* outlen) except -1
cdef object sockaddr_to_tuple(const sockaddr_storage* sa)

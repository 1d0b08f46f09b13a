# Declarations of the single-datagram sender (senders.pyx) shared with other modules: the transport's send core
# sends with a C call.

cdef class DatagramSender:
    cdef object _sock
    cdef int _fd
    cdef dict _addrs        # dest key -> bytes holding a sockaddr_storage + length

    cdef bytes _addr_of(self, object dest)
    cdef Py_ssize_t send_raw(self, const char* buf, size_t n, object dest) except -1

# The delivery executor's per-task path (serial.pyx): the ordering protocols' cores hand over in C.

cdef class SerialCore:
    cdef public str name
    cdef public bint caller_runs
    cdef public bint relay
    cdef public object _q                 # deque of (fn, args)
    cdef public object _wakeup            # executor.Wakeup of the executor's thread
    cdef public bint _running
    cdef public bint _busy
    cdef public object _claim             # threading.Lock: held by whoever runs tasks
    cdef public unsigned long _runner
    cdef public unsigned long _thread_ident   # the executor's own thread (0 until it runs)
    cdef public int _drainers
    cdef public object _idle              # threading.Condition, for drain() only
    cdef object _append, _popleft, _acquire, _release

    cdef bint _enqueue(self, fn, tuple args) except -1
    cdef int _run_pending(self) except -1
    cdef object _relay_pair(self)
    cdef int _run_here(self) except -1
    cdef int _run_queued(self) except -1
    cdef int _call(self, fn, tuple args) except -1
    cpdef bint in_thread(self)

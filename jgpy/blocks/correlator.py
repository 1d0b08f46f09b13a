"""``org.jgroups.blocks.RequestCorrelator`` (2.12) and the requests it tracks (GroupRequest, Rsp, RspList).

On the wire (protocol id 201): a request carries ``RequestCorrelatorHeader`` (type REQ, a request id,
rsp_expected, corr_id 201), or ``MultiDestinationHeader`` (the same plus an exclusion list) when the caller
excludes members; the payload is the caller's. A response goes to the requester as an OOB|DONT_BUNDLE unicast
(plus NO_FC / NO_RELIABILITY / NO_TOTAL_ORDER when the request had them) with header type RSP and the request's
id; its payload is ``Util.objectToByteBuffer`` of the handler's return value or of the Throwable it raised.

Hostile input (jgpy's bounds; Java 2.12 has none of them): a response for a request id we do not wait for, or
from a member the request was not sent to, is counted and dropped; a payload that cannot be read is counted, and
the caller sees the error as that member's exception (as Java); a request from a sender outside the current
view is counted and dropped, unanswered (Java answers anyone); the table of our own outstanding requests is
bounded by ``max_outstanding`` (a caller beyond it gets an error at once, nothing is sent).

A caller that waits for its answers reads them itself when the channel lets it (``Channel.read_while``: UDP
with relay delivery, one such caller at a time): it handles the answers to its own request on its own thread,
so an answer needs no thread switch to reach its caller; everything else it reads goes to the delivery threads.
Any other answer is handled on the receive thread that read it (:meth:`RequestCorrelator.intercept`, added by
the dispatcher with ``Channel.add_oob_interceptor``), not queued for the OOB delivery thread: a synchronous
call made inside an OOB request's handler would otherwise wait there behind that very handler until it timed
out (Java's OOB thread pool runs the answer on another thread). No application code runs on the receive
thread: an answer to a request with a response filter is handed to a caller waiting for that request (it
runs the filter on its own thread; a synchronous caller counts itself before its request leaves), or, with
nobody waiting, to the OOB thread; done callbacks are handed to the OOB thread.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Callable, Collection, Iterator, Mapping, Protocol

from jgpy._core.address import Address
from jgpy._core.message import Message
from jgpy._core.request import CorrelatorCore, RequestCore, RspCore
from jgpy._core.request import configure as configure_request_core
from jgpy.errors import JgpyError
from jgpy.headers import MultiDestinationHeader, RequestCorrelatorHeader
from jgpy.javaser import JavaSerializationError
from jgpy.javaser_values import JavaException, deserialize
from jgpy.javaser_write import BOXED_SUBCLASSES, JavaWriteError, serialize, throwable_from_exception
from jgpy.stack.logutil import RateLimitedLog

log = logging.getLogger(__name__)

#: RequestCorrelator's protocol id (jg-protocol-ids.xml: blocks.RequestCorrelator)
CORRELATOR_ID = 201
REQ, RSP = 0, 1
_OOB, _DONT_BUNDLE = Message.OOB, Message.DONT_BUNDLE
_COPIED_FLAGS = Message.NO_FC | Message.NO_RELIABILITY | Message.NO_TOTAL_ORDER
TAG_SERIALIZABLE = 2
TAG_BYTEARRAY = 19
_PLAIN = (type(None), bool, int, float, bytes, bytearray)
#: exact types whose ``objectToByteBuffer`` form the dialect writes as they are (an int may need a Long)
_PLAIN_EXACT = frozenset((type(None), bool, float, bytes))


class ResponseMode:
    """How many responses a call waits for (``org.jgroups.blocks.Request``'s constants)."""

    GET_FIRST = 1
    GET_ALL = 2
    GET_MAJORITY = 3
    GET_ABS_MAJORITY = 4
    GET_NONE = 6


class RspFilter(Protocol):
    """Java's RspFilter: which responses count, and whether the call still needs more."""

    def is_acceptable(self, response: Any, sender: Address) -> bool: ...

    def need_more_responses(self) -> bool: ...


@dataclass
class RequestOptions:
    """``org.jgroups.blocks.RequestOptions``: response mode, timeout in ms (0: wait for ever), anycasting
    (one unicast per destination instead of a multicast), a response filter, message flags (e.g.
    ``Message.OOB``) and an exclusion list (members that drop the request)."""

    mode: int = ResponseMode.GET_ALL
    timeout: int = 5000
    anycasting: bool = False
    rsp_filter: RspFilter | None = None
    flags: int = 0
    exclusion_list: Collection[Address] | None = None

    @classmethod
    def sync(cls, timeout: int = 5000) -> RequestOptions:
        return cls(ResponseMode.GET_ALL, timeout)

    @classmethod
    def async_(cls, timeout: int = 5000) -> RequestOptions:
        return cls(ResponseMode.GET_NONE, timeout)


class SuspectedError(JgpyError):
    """The member a call went to was suspected or left before it answered (Java's SuspectedException)."""

    def __init__(self, member: Address) -> None:
        super().__init__(f"{member} was suspected or left during the call")
        self.member = member


class Rsp(RspCore):
    """One member's answer: ``value`` (a value, or the exception the call raised there), ``received``,
    ``suspected`` (the fields are the C core's, ``RspCore``)."""

    __slots__ = ()

    @property
    def exception(self) -> BaseException | None:
        """The exception the member's handler raised (a :class:`JavaException` for a Java member), or None."""
        return self.value if self.received and isinstance(self.value, BaseException) else None

    def get(self) -> Any:
        """The value; raises the member's exception, :class:`SuspectedError`, or TimeoutError (no answer)."""
        if self.received:
            if isinstance(self.value, BaseException):
                raise self.value
            return self.value
        if self.suspected:
            raise SuspectedError(self.sender)
        raise TimeoutError(f"no response from {self.sender}")

    def __repr__(self) -> str:
        state = "received" if self.received else "suspected" if self.suspected else "not received"
        return f"Rsp({self.sender}, {state}, value={self.value!r})"


class RspList(Mapping[Address, Rsp]):
    """The answers of a group call by member (Java's RspList). A request's ``results()`` (the C core) makes one
    over a dict of copies it owns: ``_rsps`` set on a bare instance, without a second copy."""

    def __init__(self, rsps: Mapping[Address, Rsp] | None = None) -> None:
        self._rsps = dict(rsps or {})

    def __getitem__(self, addr: Address) -> Rsp:
        return self._rsps[addr]

    def __iter__(self) -> Iterator[Address]:
        return iter(self._rsps)

    def __len__(self) -> int:
        return len(self._rsps)

    def get_value(self, addr: Address) -> Any:
        r = self._rsps.get(addr)
        return r.value if r is not None else None

    def get_first(self) -> Any:
        """The first received value (None if none)."""
        return next((r.value for r in self._rsps.values() if r.received), None)

    def get_results(self) -> list[Any]:
        """The received values (exceptions included), in member order."""
        return [r.value for r in self._rsps.values() if r.received]

    @property
    def num_received(self) -> int:
        return sum(1 for r in self._rsps.values() if r.received)

    @property
    def num_suspected(self) -> int:
        return sum(1 for r in self._rsps.values() if r.suspected)

    def is_received(self, addr: Address) -> bool:
        r = self._rsps.get(addr)
        return r is not None and r.received

    def is_suspected(self, addr: Address) -> bool:
        r = self._rsps.get(addr)
        return r is not None and r.suspected

    @property
    def suspected_members(self) -> list[Address]:
        return [a for a, r in self._rsps.items() if r.suspected]

    def __repr__(self) -> str:
        return "RspList(" + ", ".join(map(repr, self._rsps.values())) + ")"


def _majority(n: int) -> int:
    return n if n < 2 else n // 2 + 1


class GroupRequest(RequestCore):
    """A call to one or more members and the answers so far (Java's GroupRequest / UnicastRequest); also a
    future: :meth:`result`, :meth:`add_done_callback`, :meth:`cancel`.

    Every call's steps are its C core's (``RequestCore``, ``jgpy/_core/request.pyx``): an answer without a
    response filter, completion, and the caller's :meth:`wait`. Waiting is a latch, not a Condition: a lock
    taken at creation and released once, when the request first becomes complete or done; a waiter takes it
    (with its timeout) and gives it back at once, so every other waiter passes too. The response that completes
    a call thus wakes the caller with one lock release, without a Condition's per-wait lock, waiter list and
    re-acquisition. Before that, a waiter reads its answers itself where the correlator's channel lets it (the
    module's docstring); ``_waker`` then wakes it when another thread completes the request. Response filters,
    done callbacks, suspicions and offered answers are this class's."""

    if TYPE_CHECKING:
        def __init__(self, corr: RequestCorrelator | None, req_id: int, targets: Collection[Address],
                     options: RequestOptions) -> None:
            """The core's."""

    # ---- responses and membership (receive threads)

    def _receive_filtered(self, rsp: Rsp, value: Any, sender: Address,
                          defer: Callable[..., None] | None) -> bool:
        """``receive_response`` (the core's) of a request with a response filter: the filter decides whether
        the answer counts and whether the call needs more."""
        flt = self.options.rsp_filter
        with self._lock:
            if self.done:
                return True
            if not rsp.received and _filter_accepts(flt, value, sender):
                rsp.value = value
                rsp.received = True
                self._num_received += 1
            if not _filter_needs_more(flt):
                self.done = True
            callbacks = self._notify(False)
        self._run_done(callbacks, defer)
        return True

    def suspect(self, member: Address) -> None:
        rsp = self.rsps.get(member)
        if rsp is None:
            return
        with self._lock:
            if rsp.received or rsp.suspected:
                return
            rsp.suspected = True
            self._num_suspected += 1
            callbacks = self._notify(False)
        if callbacks:
            self._run(callbacks)

    def view_change(self, members: Collection[Address]) -> None:
        left = [a for a in self.rsps if a not in members]
        for a in left:
            self.suspect(a)

    # ---- completion

    def is_complete(self) -> bool:
        with self._lock:
            return self._complete()

    def offer(self, msg: Message, hdr: Any) -> bool:
        """On a receive thread: hand the answer ``msg`` to a caller waiting for this request (one with a
        response filter), which handles it on its own thread; False (it goes the usual way) when no caller waits
        here, when the sender is not one of the request's members (a multicast call reaches every member, and
        all of them answer: ours too), or when as many answers wait as the request has members."""
        if self._cv is None or msg.src not in self.rsps:
            return False
        with self._lock:
            if self._takers == 0 or self.done or len(self._inbox) >= len(self.rsps):
                return False                           # (a member answers once: more is a stranger's flood)
            self._inbox.append((msg, hdr))
            self._cv.notify_all()
        if self._waker is not None:
            self._waker()                              # a caller reading its answers: take this one first
        return True

    def _wait_filtered(self, timeout: float) -> None:
        """Wait (``timeout`` seconds, < 0: for ever) until the answers are complete, handling the answers
        that receive threads :meth:`offer` on this thread meanwhile."""
        assert self._cv is not None
        deadline = None if timeout < 0 else time.monotonic() + timeout
        with self._lock:
            if self._reserved:
                self._reserved = False                 # this thread is the one reserve() counted
            else:
                self._takers += 1
        try:
            while True:
                with self._lock:
                    while not self._inbox and not self._notified:
                        left = None if deadline is None else deadline - time.monotonic()
                        if left is not None and left <= 0:
                            return
                        self._cv.wait(left)
                    if not self._inbox:
                        return
                    batch, self._inbox = self._inbox, []
                self._handle_offered(batch)
        finally:
            with self._lock:
                self._takers -= 1
                left_over, self._inbox = (self._inbox, []) if self._takers == 0 else ([], self._inbox)
            self._handle_offered(left_over)            # offered while this thread was leaving: not lost

    def _handle_offered(self, batch: list[tuple[Message, Any]]) -> None:
        corr = self.corr
        if corr is not None:                           # (offers come from the correlator's intercept)
            for msg, hdr in batch:
                corr._handle_response(msg, hdr)

    def cancel(self) -> bool:
        with self._lock:
            was = not self.done
            self.done = True
            callbacks = self._notify(True)
        self._forget(callbacks)
        return was

    if TYPE_CHECKING:
        def results(self) -> RspList:
            """The answers so far, by member (copies): the core's."""

    # ---- the future API

    def result(self, timeout: float | None = None) -> RspList:
        """Wait (``timeout`` seconds; None: the request's own timeout) and return the answers."""
        self.wait(self.options.timeout if timeout is None else timeout * 1000.0)
        return self.results()

    def add_done_callback(self, fn: Callable[[GroupRequest], None]) -> None:
        """Call ``fn(request)`` once the answers are complete or the request is done (at once if it is)."""
        with self._lock:
            if not self._notified:
                self._callbacks.append(fn)
                return
        fn(self)

    def _run(self, callbacks: list[Callable[[GroupRequest], None]]) -> None:
        for fn in callbacks:
            try:
                fn(self)
            except Exception:  # noqa: BLE001 - a caller's callback must not break the receive thread
                log.exception("a request's done callback failed")


configure_request_core(Rsp, RspList)


def _filter_accepts(flt: RspFilter, value: Any, sender: Address) -> bool:
    try:
        return bool(flt.is_acceptable(value, sender))
    except Exception:  # noqa: BLE001 - a failing filter rejects the response
        log.exception("RspFilter.is_acceptable failed")
        return False


def _filter_needs_more(flt: RspFilter) -> bool:
    try:
        return bool(flt.need_more_responses())
    except Exception:  # noqa: BLE001
        log.exception("RspFilter.need_more_responses failed")
        return False


# ---- values <-> payloads (Util.objectToByteBuffer / objectFromByteBuffer) -----------------------------------

def marshal_value(value: Any, dialect: Any) -> bytes:
    """``Util.objectToByteBuffer(value)``: the dialect's tagged primitives, else tag 2 + Java serialization. A
    str that is not Latin-1 goes serialized (Java's own tag would drop the high bits of its chars)."""
    if type(value) in _PLAIN_EXACT:                  # (the common answers: no boxing, no subclass to look at)
        return dialect.object_to_buffer(value)       # type: ignore[no-any-return]
    if isinstance(value, BaseException):
        return b"\x02" + serialize(throwable_from_exception(value))
    box = getattr(value, "JAVA_TYPE", None)
    if box is not None:
        return bytes(dialect.object_to_buffer(value, box))
    if isinstance(value, _PLAIN) and not (isinstance(value, int) and not -(1 << 63) <= value < (1 << 63)):
        return bytes(dialect.object_to_buffer(value))
    if isinstance(value, str):
        try:
            value.encode("latin-1")
            return bytes(dialect.object_to_buffer(value))
        except UnicodeEncodeError:
            return b"\x02" + serialize(value)
    if type(value).__name__ == "JavaObject" and getattr(value, "type", None) not in (None, "Serializable",
                                                                                   "Streamable"):
        return bytes(dialect.object_to_buffer(value))
    return b"\x02" + serialize(value)


def unmarshal_value(data: memoryview | bytes, dialect: Any) -> Any:
    """The value of a response payload; tag 2 is read by the bounded Java stream reader."""
    if len(data) and data[0] == TAG_BYTEARRAY:
        return bytes(data[1:])                     # (a byte[]: the rest, as Util.objectFromByteBuffer)
    if len(data) and data[0] == TAG_SERIALIZABLE:
        return deserialize(bytes(data[1:]))
    typed = dialect.object_from_buffer(bytes(data), True)
    box = BOXED_SUBCLASSES.get(typed.type)
    return box(typed.value) if box is not None else typed.value


ReadWhile = Callable[[Callable[[], bool], float, Callable[[Message], bool]], bool]


class RequestHandler(Protocol):
    def handle(self, msg: Message) -> Any: ...


class RequestCorrelator(CorrelatorCore):
    """Sends requests with header 201, matches responses to them, and answers requests with ``handler``.

    ``send`` puts a message down the channel; ``members`` returns the current members (None: no view yet).
    """

    def __init__(self, send: Callable[[Message], None], handler: RequestHandler | None, dialect: Any,
                 local_addr: Callable[[], Address | None], members: Callable[[], Collection[Address] | None],
                 max_outstanding: int = 100_000, read_while: ReadWhile | None = None,
                 wake_reader: Callable[[], None] | None = None, defer: Callable[..., None] | None = None) -> None:
        self._send = send
        #: ``defer(fn, *args)`` runs ``fn`` where it may block (the OOB delivery thread): done callbacks of an
        #: answer handled by :meth:`intercept` on a receive thread
        self.defer = defer
        #: ``Channel.read_while`` and ``wake_reader``: a waiting caller reads its answers (the module docstring)
        self.read_while = read_while
        self.wake_reader = wake_reader
        self.handler = handler
        self.dialect = dialect
        self._local_addr = local_addr
        self._members = members
        #: jgpy: the most requests of ours that may wait for answers at once
        self.max_outstanding = max_outstanding
        self.requests: dict[int, GroupRequest] = {}
        self._lock = threading.Lock()
        self._rl = RateLimitedLog(log)
        self.started = True
        # counters
        self.requests_sent = 0
        self.requests_handled = 0
        self.responses_sent = 0
        self.responses_received = 0
        self.dropped_unknown_responses = 0
        self.dropped_non_member_requests = 0
        self.dropped_excluded_requests = 0
        self.malformed_responses = 0
        self.unmarshallable_results = 0

    # ---- sending: the core's next_id, send_request and done

    def stop(self) -> None:
        """Forget every outstanding request: their callers return what they have (not received)."""
        self.started = False
        with self._lock:
            reqs = list(self.requests.values())
            self.requests.clear()
        for r in reqs:
            r.cancel()

    # ---- membership

    def receive_view(self, members: Collection[Address]) -> None:
        mset = set(members)
        for r in self._snapshot():
            r.view_change(mset)

    def receive_suspect(self, member: Address) -> None:
        for r in self._snapshot():
            r.suspect(member)

    def _snapshot(self) -> list[GroupRequest]:
        with self._lock:
            return list(self.requests.values())

    # ---- receiving

    def receive_message(self, msg: Message) -> bool:
        """Handle ``msg`` if it carries our header; False: not ours, pass it up."""
        hdr = msg.get_header(CORRELATOR_ID)
        if type(hdr) is RequestCorrelatorHeader and hdr.type == REQ and hdr.corr_id == CORRELATOR_ID:
            self._handle_request(msg, hdr)             # (a request without an exclusion list: the common case)
            return True
        if hdr is None or not isinstance(hdr, RequestCorrelatorHeader):
            return False
        if hdr.corr_id != CORRELATOR_ID:
            return False
        if isinstance(hdr, MultiDestinationHeader) and hdr.exclusion_list:
            me = self._local_addr()
            if me is not None and me in hdr.exclusion_list:
                self.dropped_excluded_requests += 1
                return True
        if hdr.type == REQ:
            self._handle_request(msg, hdr)
        elif hdr.type == RSP:
            self._handle_response(msg, hdr)
        else:
            self._rl.warning("bad-type", "dropped a message with a correlator header of unknown type %d", hdr.type)
        return True

    def intercept(self, msg: Message) -> bool:
        """On a receive thread (``Channel.add_oob_interceptor``): handle ``msg`` here if it answers a request
        without a response filter, running no application code here (done callbacks go to ``defer``); an answer
        to a request with one goes to its waiting caller (:meth:`GroupRequest.offer`); False: anything else, for
        the delivery threads (requests, whose handlers may block; filtered answers nobody waits for)."""
        hdr = msg.get_header(CORRELATOR_ID)
        if type(hdr) is not RequestCorrelatorHeader or hdr.type != RSP or hdr.corr_id != CORRELATOR_ID:
            return False
        req = self.requests.get(hdr.id)
        if req is not None and req.options.rsp_filter is not None:
            return req.offer(msg, hdr)                 # its waiting caller runs the filter, or the OOB thread
        self._handle_response(msg, hdr, self.defer)
        return True

    def _handle_response(self, msg: Message, hdr: Any, defer: Callable[..., None] | None = None) -> None:
        req = self.requests.get(hdr.id)          # one dict read: atomic, no lock needed
        if req is None or msg.src not in req.rsps:
            self.dropped_unknown_responses += 1
            return
        self.responses_received += 1
        payload = msg.buffer
        try:
            value = unmarshal_value(payload if payload is not None else b"\x00", self.dialect)
        except (JavaSerializationError, JgpyError, ValueError, IndexError) as e:
            self.malformed_responses += 1
            self._rl.warning("bad-rsp", "a response could not be read: %s", e)
            value = e
        req.receive_response(value, msg.src, defer)

    def _handle_request(self, msg: Message, hdr: Any) -> None:
        members = self._members()
        if members is not None and msg.src not in members:
            self.dropped_non_member_requests += 1
            self._rl.warning("non-member", "dropped a request from a non-member")
            return
        handler = self.handler
        if handler is None:
            self._rl.warning("no-handler", "a request arrived but no request handler is set: dropped")
            return
        self.requests_handled += 1
        try:
            value = handler.handle(msg)
        except Exception as e:  # noqa: BLE001 - the caller gets the exception
            value = e
        if not hdr.rsp_expected or not self.started:
            return
        try:
            buf = marshal_value(value, self.dialect)
        except (JavaWriteError, ValueError, TypeError, OverflowError) as e:
            self.unmarshallable_results += 1
            self._rl.warning("unmarshallable", "the result of a request cannot be marshalled: %s", e)
            buf = marshal_value(JavaWriteError(f"the result cannot be sent to the caller: {e}"), self.dialect)
        rsp = Message(msg.src, buf, None, _OOB | _DONT_BUNDLE | (msg.flags & _COPIED_FLAGS))
        rsp.put_header(CORRELATOR_ID, RequestCorrelatorHeader(RSP, hdr.id, False, CORRELATOR_ID))
        try:
            self._send(rsp)
            self.responses_sent += 1
        except Exception as e:  # noqa: BLE001 - a closing channel: the caller times out
            self._rl.warning("rsp-send", "could not send a response: %s", e)

    def stats(self) -> dict[str, int]:
        return {k: getattr(self, k) for k in (
            "requests_sent", "requests_handled", "responses_sent", "responses_received", "dropped_unknown_responses",
            "dropped_non_member_requests", "dropped_excluded_requests", "malformed_responses",
            "unmarshallable_results")} | {"outstanding": len(self.requests)}


__all__ = ["CORRELATOR_ID", "GroupRequest", "JavaException", "RequestCorrelator", "RequestHandler",
           "RequestOptions", "ResponseMode", "Rsp", "RspFilter", "RspList", "SuspectedError", "marshal_value",
           "unmarshal_value"]

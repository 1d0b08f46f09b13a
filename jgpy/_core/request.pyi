"""Types of jgpy._core.request (Cython): the C half of a remote call (``GroupRequest`` derives from it)."""

from typing import Any, Callable

from typing_extensions import disjoint_base

from jgpy._core.message import Message

def configure(rsp_type: type[RspCore], rsplist_type: type) -> None: ...

@disjoint_base
class RspCore:
    """One member's answer to a call."""

    sender: Any
    value: Any
    received: bool
    suspected: bool

    def __init__(self, sender: Any) -> None: ...

@disjoint_base
class RequestCore:
    """The answers of a call by member, their counts, done and the latch its caller waits on."""

    corr: Any
    req_id: int
    options: Any
    rsps: dict[Any, Any]
    done: bool
    _notified: bool
    _num_received: int
    _num_suspected: int
    _lock: Any
    _cv: Any
    _callbacks: list[Callable[[Any], None]]
    _inbox: list[tuple[Message, Any]]
    _waker: Callable[[], None] | None
    _reader: int
    _takers: int
    _reserved: bool

    def __init__(self, corr: Any, req_id: int, targets: Any, options: Any) -> None: ...
    def _complete(self) -> bool: ...
    def _notify(self, force: bool) -> list[Callable[[Any], None]] | None: ...
    def receive_response(self, value: Any, sender: Any, defer: Callable[..., None] | None = None) -> bool: ...
    def _consume(self, msg: Message) -> bool: ...
    def _pending(self) -> bool: ...
    def reserve(self) -> None: ...
    def results(self) -> Any: ...
    def wait(self, timeout_ms: float) -> bool: ...
    def _run_done(self, callbacks: list[Callable[[Any], None]] | None, defer: Callable[..., None] | None) -> None: ...
    def _forget(self, callbacks: list[Callable[[Any], None]] | None) -> None: ...

@disjoint_base
class CorrelatorCore:
    """Our outstanding requests by id, their ids, and a request's way out."""

    requests: dict[int, Any]
    _lock: Any
    _send: Callable[[Message], None]
    max_outstanding: int
    requests_sent: int

    def next_id(self) -> int: ...
    def send_request(self, req: RequestCore, msg: Message, dests: Any) -> None: ...
    def done(self, req_id: int) -> None: ...

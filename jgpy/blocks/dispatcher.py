"""``org.jgroups.blocks.MessageDispatcher`` (2.12): requests to members, their answers collected.

The dispatcher becomes the channel's receiver: messages with the correlator's header (id 201) are requests or
answers; everything else, and every view, suspicion, block and state callback, goes on to the receiver the
channel had before (or the one given), as Java's MessageDispatcher passes them to its MessageListener and
MembershipListener. Requests are handled on the thread that delivers them (regular requests in order with
the other messages, OOB requests on the OOB thread), as Java does: a handler that blocks holds up that
delivery. Answers (OOB) are handled on the receive thread that read them (the dispatcher adds its
correlator's ``intercept`` with ``Channel.add_oob_interceptor``), so one a blocked handler waits for is not
queued behind it; an answer to a request with a response filter goes to the caller waiting for it, which
runs the filter on its own thread (or, with nobody waiting, to the OOB thread); done callbacks run on the
OOB thread.
"""

from __future__ import annotations

import threading
from typing import Any, BinaryIO, Callable, Collection

from jgpy._core.address import Address
from jgpy._core.message import Message
from jgpy._core.types import View
from jgpy.channel import Channel, Receiver
from jgpy.blocks.correlator import (GroupRequest, RequestCorrelator, RequestHandler, RequestOptions, ResponseMode,
                                    RspList, SuspectedError)


class _Adapter(Receiver):
    """The channel's receiver while a dispatcher is started."""

    def __init__(self, owner: MessageDispatcher, inner: Receiver) -> None:
        self.owner = owner
        self.inner = inner

    def receive(self, msg: Message) -> None:
        if not self.owner.corr.receive_message(msg):
            self.inner.receive(msg)

    def receive_batch(self, msgs: list[Message]) -> None:
        take = self.owner.corr.receive_message
        if len(msgs) == 1:                                 # (a lone request: no list built)
            if take(msgs[0]):
                return
            rest = msgs
        else:
            rest = [m for m in msgs if not take(m)]
        if rest:
            fn = getattr(type(self.inner), "receive_batch", None)
            if fn is not None and fn is not Receiver.receive_batch:
                self.inner.receive_batch(rest)
            else:
                for m in rest:
                    self.inner.receive(m)

    def view_accepted(self, view: View) -> None:
        self.owner._view(view)
        self.inner.view_accepted(view)

    def suspect(self, addr: Address) -> None:
        self.owner.corr.receive_suspect(addr)
        self.inner.suspect(addr)

    def block(self) -> None:
        self.inner.block()

    def unblock(self) -> None:
        self.inner.unblock()

    def get_state(self) -> bytes | None:
        return self.inner.get_state()

    def set_state(self, state: bytes) -> None:
        self.inner.set_state(state)

    def get_partial_state(self, state_id: str) -> bytes | None:
        return self.inner.get_partial_state(state_id)

    def set_partial_state(self, state_id: str, state: bytes) -> None:
        self.inner.set_partial_state(state_id, state)

    def get_state_stream(self, out: BinaryIO, state_id: str | None) -> None:
        self.inner.get_state_stream(out, state_id)

    def set_state_stream(self, inp: BinaryIO, state_id: str | None) -> None:
        self.inner.set_state_stream(inp, state_id)


class _FunctionHandler:
    def __init__(self, fn: Callable[[Message], Any]) -> None:
        self.handle = fn


class MessageDispatcher:
    """Requests and answers over ``channel``: :meth:`cast_message` (to many), :meth:`send_message` (to one);
    ``handler`` (an object with ``handle(msg)``, or a function of the message) answers the requests of others:
    its return value, or the exception it raises, goes back to the caller.

    ``receiver`` gets every message that is not a request or answer (default: the channel's receiver at
    construction). ``max_outstanding`` (jgpy) bounds our requests waiting for answers."""

    def __init__(self, channel: Channel, handler: RequestHandler | Callable[[Message], Any] | None = None,
                 receiver: Receiver | None = None, max_outstanding: int = 100_000) -> None:
        self.channel = channel
        if handler is not None and not hasattr(handler, "handle"):
            handler = _FunctionHandler(handler)
        self._members: list[Address] | None = list(channel.view.members or ()) if channel.view is not None else None
        #: the same as a set (None: no view yet), for the membership tests of every request sent and served
        self._member_set: frozenset[Address] | None = frozenset(self._members) if self._members is not None else None
        self._members_lock = threading.Lock()
        self.corr = RequestCorrelator(channel.send, handler, channel.stack.dialect,
                                      lambda: channel.address, lambda: self._member_set, max_outstanding,
                                      channel.read_while, channel.wake_reader, self._defer)
        self._adapter = _Adapter(self, receiver if receiver is not None else channel.receiver)
        channel.receiver = self._adapter
        channel.add_oob_interceptor(self.corr.intercept)    # answers are handled where they are read

    def _defer(self, fn: Callable[..., None], *args: Any) -> None:
        """Run ``fn(*args)`` on the OOB delivery thread (here if this is it, or without one)."""
        ex = self.channel.stack.oob_delivery
        if ex is None or ex.in_thread():
            fn(*args)
        else:
            ex.submit(fn, *args)

    # ---- life cycle

    @property
    def receiver(self) -> Receiver:
        """Where messages that are not requests or answers go."""
        return self._adapter.inner

    @receiver.setter
    def receiver(self, receiver: Receiver) -> None:
        self._adapter.inner = receiver

    def stop(self) -> None:
        """Stop answering, end every outstanding request, and give the channel its receiver back."""
        self.corr.stop()
        self.channel.remove_oob_interceptor(self.corr.intercept)
        if self.channel.receiver is self._adapter:
            self.channel.receiver = self._adapter.inner

    def _view(self, view: View) -> None:
        with self._members_lock:
            self._members = list(view.members or ())
            self._member_set = frozenset(self._members)
        self.corr.receive_view(self._member_set)

    @property
    def members(self) -> list[Address]:
        m = self._members
        if m is None and self.channel.view is not None:
            m = list(self.channel.view.members or ())
        return list(m or ())

    # ---- requests

    def _targets(self, dests: Collection[Address] | None, options: RequestOptions) -> list[Address]:
        if dests is None:
            real = self.members
        else:
            mset = self._member_set
            if mset is None:
                mset = frozenset(self.members)
            real = list(filter(mset.__contains__, dests))   # Java: retainAll(members)
        if options.exclusion_list:
            excl = set(options.exclusion_list)
            real = [d for d in real if d not in excl]
        return real

    def cast_message_with_future(self, dests: Collection[Address] | None, msg: Message,
                                 options: RequestOptions | None = None) -> GroupRequest:
        """Send ``msg`` (its payload is the request) to ``dests`` (None: every member) and return the request at
        once; its :meth:`~GroupRequest.result` waits for the answers."""
        return self._cast(dests, msg, options or RequestOptions(), False)

    def _cast(self, dests: Collection[Address] | None, msg: Message, options: RequestOptions,
              waiting: bool) -> GroupRequest:
        """:meth:`cast_message_with_future`; ``waiting``: the caller waits for the answers (reserves them)."""
        targets = self._targets(dests, options)
        req = GroupRequest(self.corr, self.corr.next_id(), targets, options)
        if not targets:
            req.done = True
            return req
        if waiting:
            req.reserve()
        if options.flags:
            msg.flags |= options.flags
        if options.anycasting:
            self.corr.send_request(req, msg, targets)
        else:
            msg.dest = None
            self.corr.send_request(req, msg, None)
        if options.mode == ResponseMode.GET_NONE:
            req.done = True
        return req

    def cast_message(self, dests: Collection[Address] | None, msg: Message,
                     options: RequestOptions | None = None) -> RspList:
        """Java's castMessage: the answers of ``dests`` (None: all members) once ``options.mode`` is satisfied
        or ``options.timeout`` ms passed (what came by then; the rest not received)."""
        options = options or RequestOptions()
        req = self._cast(dests, msg, options, options.mode != ResponseMode.GET_NONE)
        if options.mode != ResponseMode.GET_NONE and not req.done:
            req.wait(options.timeout)
        return req.results()

    def send_message_with_future(self, msg: Message, options: RequestOptions | None = None) -> GroupRequest:
        return self._send_one(msg, options or RequestOptions(), False)

    def _send_one(self, msg: Message, options: RequestOptions, waiting: bool) -> GroupRequest:
        """:meth:`send_message_with_future`; ``waiting``: the caller waits for the answer (reserves it)."""
        if msg.dest is None:
            raise ValueError("send_message needs a destination: use cast_message for the whole group")
        if options.flags:
            msg.flags |= options.flags
        req = GroupRequest(self.corr, self.corr.next_id(), [msg.dest], options)
        if waiting:
            req.reserve()
        self.corr.send_request(req, msg, [msg.dest])
        if options.mode == ResponseMode.GET_NONE:
            req.done = True
        return req

    def send_message(self, msg: Message, options: RequestOptions | None = None) -> Any:
        """Java's sendMessage: the answer of ``msg.dest``. Raises the exception its handler raised (a
        :class:`~jgpy.javaser_values.JavaException` from Java), :class:`SuspectedError` when it was suspected or
        left, ``TimeoutError`` after ``options.timeout`` ms; GET_NONE returns None at once."""
        options = options or RequestOptions()
        dest = msg.dest
        if dest is None:
            raise ValueError("send_message needs a destination: use cast_message for the whole group")
        req = self._send_one(msg, options, options.mode != ResponseMode.GET_NONE)
        if options.mode == ResponseMode.GET_NONE:
            return None
        req.wait(options.timeout)
        rsp = req.results()[dest]
        return rsp.get()


__all__ = ["MessageDispatcher", "RequestOptions", "ResponseMode", "RspList", "SuspectedError"]

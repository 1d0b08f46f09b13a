"""asyncio facade over :class:`jgpy.Channel`.

>>> async def main():
...     async with AsyncChannel("udp.xml", name="A") as ch:
...         await ch.connect("demo")
...         await ch.send(None, b"hello")
...         async for msg in ch:          # messages (views: ch.views())
...             print(msg.src, msg.buffer)

Callbacks of the channel's delivery threads are handed to the event loop with
``call_soon_threadsafe``; blocking channel calls (connect, send under flow control, get_state,
disconnect) run in the loop's default executor so the loop never blocks.

State transfer: the provider's and requester's state callbacks run on the channel's delivery thread, in
order with the messages, so they cannot be coroutines. Pass an object with the :class:`Receiver` state
methods (``get_state``/``set_state``, partial and stream variants) as ``state``:

>>> class Counter:
...     n = 0
...     def get_state(self): return str(self.n).encode()
...     def set_state(self, state): self.n = int(state)
>>> ch = AsyncChannel("udp.xml", state=Counter())
>>> await ch.get_state(timeout=5000)          # True once Counter.set_state() ran
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor, ThreadPoolExecutor
from typing import Any, AsyncIterator, BinaryIO, Callable, Mapping, Sequence, TypeVar

from jgpy._core.address import Address, UUID
from jgpy._core.message import Message
from jgpy._core.types import View
from jgpy.channel import Channel, Payload, Receiver
from jgpy.stack.config import StackConfig

_T = TypeVar("_T")
#: what :meth:`AsyncChannel.next_event` returns: ``("suspect", addr)``, ``("block", None)`` or ``("unblock", None)``
ChannelEvent = tuple[str, Any]


class _Bridge(Receiver):
    def __init__(self, owner: AsyncChannel) -> None:
        self.owner = owner

    def receive(self, msg: Message) -> None:
        self.owner._post_messages([msg])

    def receive_batch(self, msgs: list[Message]) -> None:      # one hand-over to the loop per received batch
        self.owner._post_messages(msgs)

    def view_accepted(self, view: View) -> None:
        self.owner._post(self.owner._views, view)

    def suspect(self, addr: Address) -> None:
        self.owner._post(self.owner._events, ("suspect", addr))

    def block(self) -> None:
        self.owner._post(self.owner._events, ("block", None))

    def unblock(self) -> None:
        self.owner._post(self.owner._events, ("unblock", None))

    # state transfer: on the delivery thread, handed straight to the user's state object
    def get_state(self) -> bytes | None:
        state: bytes | None = _call(self.owner.state, "get_state", Receiver.get_state)
        return state

    def set_state(self, state: bytes) -> None:
        _call(self.owner.state, "set_state", Receiver.set_state, state)

    def get_partial_state(self, state_id: str) -> bytes | None:
        state: bytes | None = _call(self.owner.state, "get_partial_state", Receiver.get_partial_state, state_id)
        return state

    def set_partial_state(self, state_id: str, state: bytes) -> None:
        _call(self.owner.state, "set_partial_state", Receiver.set_partial_state, state_id, state)

    def get_state_stream(self, out: BinaryIO, state_id: str | None) -> None:
        _call(self.owner.state, "get_state_stream", Receiver.get_state_stream, out, state_id)

    def set_state_stream(self, inp: BinaryIO, state_id: str | None) -> None:
        _call(self.owner.state, "set_state_stream", Receiver.set_state_stream, inp, state_id)


async def _put_all(q: asyncio.Queue[_T], items: list[_T]) -> None:
    for item in items:
        await q.put(item)


def _put_all_nowait(q: asyncio.Queue[_T], items: list[_T]) -> None:
    for item in items:
        q.put_nowait(item)


def _call(obj: Any, name: str, default: Callable[..., Any], *args: Any) -> Any:
    """obj.name(*args), or Receiver's default (built on get_state/set_state) when obj lacks it."""
    fn = getattr(obj, name, None)
    return fn(*args) if fn is not None else default(obj, *args)


class AsyncChannel:
    """A :class:`Channel` for asyncio code. ``max_queued`` bounds the message queue (0: unbounded);
    when it is full, delivery waits, which slows senders down through flow control. ``state``: the
    object whose state callbacks serve and install state transfers (default: no state)."""

    def __init__(self, config: str | StackConfig = "udp.xml", name: str | None = None,
                 props: Mapping[str, str] | None = None, max_queued: int = 0, state: Any = None) -> None:
        self.channel = Channel(config, name, props)
        self.state = state if state is not None else Receiver()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._messages: asyncio.Queue[Message] = asyncio.Queue(max_queued)
        self._views: asyncio.Queue[View] = asyncio.Queue()
        self._events: asyncio.Queue[ChannelEvent] = asyncio.Queue()
        # sends leave in the order they were called: one thread runs them (the loop's default executor, a pool,
        # would let concurrent sends of one channel overtake each other)
        self._sender = ThreadPoolExecutor(1, thread_name_prefix="jgpy-aio-send")
        self.channel.receiver = _Bridge(self)

    def _post(self, q: asyncio.Queue[_T], item: _T) -> None:
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        loop.call_soon_threadsafe(q.put_nowait, item)

    def _post_messages(self, msgs: list[Message]) -> None:
        """(delivery thread) Queue a batch of messages with one wake-up of the loop; with ``max_queued``,
        wait until all of them are queued."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return
        q = self._messages
        if q.maxsize:
            fut = asyncio.run_coroutine_threadsafe(_put_all(q, msgs), loop)
            try:
                fut.result()
            except Exception:  # noqa: BLE001 - the loop went away
                pass
        else:
            loop.call_soon_threadsafe(_put_all_nowait, q, msgs)

    async def _run(self, fn: Callable[..., _T], *args: Any, executor: Executor | None = None) -> _T:
        loop = asyncio.get_running_loop()
        self._loop = loop
        return await loop.run_in_executor(executor, fn, *args)

    async def connect(self, cluster: str) -> AsyncChannel:
        await self._run(self.channel.connect, cluster)
        return self

    async def send(self, dest_or_msg: Address | Message | None, payload: Payload = None, *, oob: bool = False,
                   flags: int = 0) -> None:
        """:meth:`Channel.send` without blocking the loop; concurrent sends leave in the order they were called."""
        await self._run(lambda: self.channel.send(dest_or_msg, payload, oob=oob, flags=flags), executor=self._sender)

    async def get_state(self, target: Address | None = None, timeout: int = 5000, state_id: str | None = None) -> bool:
        """:meth:`Channel.get_state` without blocking the loop: True once ``state.set_state`` (or the
        partial/stream variant) ran, False when there was no state or after ``timeout`` ms."""
        return await self._run(self.channel.get_state, target, timeout, state_id)

    async def start_flush(self, participants: Sequence[Address] | None = None, automatic_resume: bool = False) -> bool:
        """:meth:`Channel.start_flush` without blocking the loop (a stack with pbcast.FLUSH)."""
        return await self._run(self.channel.start_flush, participants, automatic_resume)

    async def stop_flush(self, participants: Sequence[Address] | None = None) -> None:
        """:meth:`Channel.stop_flush` without blocking the loop."""
        await self._run(self.channel.stop_flush, participants)

    async def disconnect(self) -> None:
        await self._run(self.channel.disconnect)

    async def close(self) -> None:
        await self._run(self.channel.close)
        self._sender.shutdown(wait=False)

    async def receive(self, timeout: float | None = None) -> Message:
        """The next message (``asyncio.TimeoutError`` after ``timeout`` seconds)."""
        return await asyncio.wait_for(self._messages.get(), timeout)

    async def next_view(self, timeout: float | None = None) -> View:
        return await asyncio.wait_for(self._views.get(), timeout)

    async def next_event(self, timeout: float | None = None) -> ChannelEvent:
        """``("suspect", addr)``, ``("block", None)`` or ``("unblock", None)``."""
        return await asyncio.wait_for(self._events.get(), timeout)

    async def views(self) -> AsyncIterator[View]:
        while True:
            yield await self._views.get()

    def __aiter__(self) -> AsyncIterator[Message]:
        return self._iter()

    async def _iter(self) -> AsyncIterator[Message]:
        while self.channel.is_open:
            yield await self._messages.get()

    @property
    def view(self) -> View | None:
        return self.channel.view

    @property
    def address(self) -> UUID | None:
        return self.channel.address

    @property
    def name(self) -> str | None:
        return self.channel.name

    async def __aenter__(self) -> AsyncChannel:
        self._loop = asyncio.get_running_loop()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

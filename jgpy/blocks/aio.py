"""asyncio variant of :class:`~jgpy.blocks.rpc.RpcDispatcher`: calls are awaited, never block the loop.

>>> async with AsyncChannel("udp.xml", name="A") as ch:
...     await ch.connect("demo")
...     rpc = AsyncRpcDispatcher(ch, server)
...     rsps = await rpc.call_remote_methods(None, "name")
...     value = await rpc.call_remote_method(addr, "add", [1, 2], types=["int", "int"])

The request is sent from the loop's thread (sending does not block unless flow control runs out of credits);
its answers complete a future on the loop (``call_soon_threadsafe`` from the receive thread). The server's
methods run on the channel's delivery threads, as for the blocking dispatcher, so they cannot be coroutines.
"""

from __future__ import annotations

import asyncio
from typing import Any, Callable, Collection, Sequence

from jgpy._core.address import Address
from jgpy.aio import AsyncChannel
from jgpy.blocks.correlator import GroupRequest, RequestOptions, ResponseMode, RspList
from jgpy.blocks.methodcall import MethodCall
from jgpy.blocks.rpc import RpcDispatcher
from jgpy.channel import Channel, Receiver


def _resolve(fut: asyncio.Future[None]) -> None:
    if not fut.done():
        fut.set_result(None)


async def wait_request(req: GroupRequest) -> RspList:
    """The answers of ``req`` once complete or its timeout passed (then what came by then)."""
    if req.done:
        return req.results()
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[None] = loop.create_future()

    def wake(_req: GroupRequest) -> None:
        loop.call_soon_threadsafe(_resolve, fut)
    req.add_done_callback(wake)
    timeout = req.options.timeout
    try:
        await asyncio.wait_for(fut, timeout / 1000.0 if timeout > 0 else None)
    except asyncio.TimeoutError:
        pass
    finally:
        req.cancel()                    # done: the correlator forgets it, late answers are dropped
    return req.results()


class AsyncRpcDispatcher:
    """The awaitable twin of :class:`RpcDispatcher` over a :class:`~jgpy.Channel` or :class:`~jgpy.AsyncChannel`
    (its message queue keeps getting every message that is not a call or an answer)."""

    def __init__(self, channel: Channel | AsyncChannel, server: Any = None, receiver: Receiver | None = None,
                 method_lookup: Callable[[int], Callable[..., Any] | None] | None = None) -> None:
        ch = channel.channel if isinstance(channel, AsyncChannel) else channel
        self.dispatcher = RpcDispatcher(ch, server, receiver, method_lookup)

    def stop(self) -> None:
        self.dispatcher.stop()

    async def call_remote_methods(self, dests: Collection[Address] | None, method: str | MethodCall,
                                  args: Sequence[Any] = (), types: Sequence[str] | None = None,
                                  options: RequestOptions | None = None) -> RspList:
        """As :meth:`RpcDispatcher.call_remote_methods`, awaited."""
        if dests is not None and len(dests) == 0:
            return RspList()
        req = self.dispatcher.call_remote_methods_with_future(dests, method, args, types, options)
        return await wait_request(req)

    async def call_remote_method(self, dest: Address, method: str | MethodCall, args: Sequence[Any] = (),
                                 types: Sequence[str] | None = None, timeout: int = 5000,
                                 options: RequestOptions | None = None) -> Any:
        """As :meth:`RpcDispatcher.call_remote_method`, awaited: the value, or its exception raised."""
        opts = options or RequestOptions(ResponseMode.GET_ALL, timeout)
        req = self.dispatcher.call_remote_method_with_future(dest, method, args, types, options=opts)
        if opts.mode == ResponseMode.GET_NONE:
            return None
        return (await wait_request(req))[dest].get()


__all__ = ["AsyncRpcDispatcher", "wait_request"]

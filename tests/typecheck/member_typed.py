"""A typed application, checked by `make typecheck` (mypy --strict, see pyproject.toml): the public API as a user
sees it through the stubs. Not a test module and never run; keep it close to what an application writes."""

from __future__ import annotations

import asyncio
import threading
from typing import BinaryIO

from jgpy import (DIALECT, Address, AsyncChannel, Channel, ChannelError, IpAddress, JavaObject, Message, MergeView,
                  Receiver, UUID, View, logical_name, object_from_buffer)
from jgpy.headers import NakAckHeader, UnicastHeader


class Counter(Receiver):
    def __init__(self) -> None:
        self.n = 0
        self.members: list[Address] = []
        self.lock = threading.Lock()

    def receive(self, msg: Message) -> None:
        with self.lock:
            self.n += 1
        src: Address | None = msg.src
        text = msg.get_object() if msg.length else None
        print(logical_name(src), text, msg.buffer, msg.flags & Message.OOB)

    def receive_batch(self, msgs: list[Message]) -> None:
        for m in msgs:
            self.receive(m)

    def view_accepted(self, view: View) -> None:
        self.members = list(view)
        if isinstance(view, MergeView) and view.subgroups:
            print("merged", [len(v) for v in view.subgroups], view.vid.id, view.coordinator)

    def suspect(self, addr: Address) -> None:
        print("suspect", addr)

    def get_state(self) -> bytes | None:
        return str(self.n).encode()

    def set_state(self, state: bytes) -> None:
        self.n = int(state)

    def get_state_stream(self, out: BinaryIO, state_id: str | None) -> None:
        out.write(str(self.n).encode())


def member(props: dict[str, str]) -> int:
    counter = Counter()
    with Channel("udp.xml", name="typed", props=props, receiver=counter) as ch:
        ch.connect("typed-cluster")
        me: UUID | None = ch.address
        ch.send(None, b"raw")
        ch.send(None, "a Java String")
        msg = Message(None, b"prepared")
        msg.set_flag(Message.OOB | Message.DONT_BUNDLE)
        ch.send(msg)
        view = ch.view
        if view is not None and view.members:
            ch.send(view.members[0], bytearray(b"to the coordinator"), oob=True)
        try:
            got = ch.get_state(None, timeout=2000)
        except ChannelError as e:
            print(e)
            got = False
        hdr = msg.get_header(12)
        if isinstance(hdr, UnicastHeader):
            print(hdr.seqno, hdr.conn_id, hdr.type == UnicastHeader.DATA)
        nak = NakAckHeader.msg(5)
        print(me, got, nak.seqno, ch.dump_stats()["UDP"], ch.is_connected)
        dg = DIALECT.decode_datagram(DIALECT.encode_message(msg))
        print(len(dg.messages), dg.is_multicast, object_from_buffer(b"\x12x", typed=True) == JavaObject("String", "x"))
        print(IpAddress("127.0.0.1", 7800).sockaddr())
    return counter.n


async def async_member() -> None:
    async with AsyncChannel("udp.xml", name="typed-async") as ch:
        await ch.connect("typed-cluster")
        await ch.send(None, b"hello")
        view: View = await ch.next_view(timeout=5)
        print(len(view))
        async for m in ch:
            data: bytes | None = m.buffer
            print(data)
            break


if __name__ == "__main__":
    member({})
    asyncio.run(async_member())

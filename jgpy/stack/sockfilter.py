"""Classic BPF socket filters (``SO_ATTACH_FILTER``): the kernel drops what a socket does not want before it is
queued, copied to user space or wakes a receive thread.

A program is a list of ``(code, jt, jf, k)`` instructions (``struct sock_filter``). On a UDP socket the filter
sees the datagram from its UDP header on: the payload starts at offset 8.
"""

from __future__ import annotations

import socket
import struct

SO_ATTACH_FILTER = 26
UDP_PAYLOAD = 8                                  # where a UDP socket's filter finds the payload

Program = list[tuple[int, int, int, int]]

#: the opcodes the programs here use (linux/filter.h: class | size | mode, class | op | source)
LD_W_ABS, LD_H_ABS, LD_B_ABS, LD_W_LEN = 0x20, 0x28, 0x30, 0x80
JA, JEQ_K, JGE_K, RET_K = 0x05, 0x15, 0x35, 0x06
_ACCEPT_ALL = 0xFFFFFFFF
_MAX_PREFIX = 60                                 # 15 word compares: far below the kernel's 4096 instructions


def attach_filter(sock: socket.socket, program: Program) -> None:
    """Attach ``program`` to ``sock``; OSError when the kernel refuses it (no socket filters here)."""
    import ctypes
    code = b"".join(struct.pack("HBBI", *ins) for ins in program)
    buf = ctypes.create_string_buffer(code, len(code))
    fprog = struct.pack("HL", len(program), ctypes.addressof(buf))
    sock.setsockopt(socket.SOL_SOCKET, SO_ATTACH_FILTER, fprog)   # the kernel copies the program


def drop_payload_prefix(prefix: bytes, offset: int = UDP_PAYLOAD) -> Program:
    """A program that drops the datagrams whose payload (at ``offset``) starts with ``prefix`` and keeps every
    other one whole, shorter ones included (a load past the end would drop them)."""
    if not 0 < len(prefix) <= _MAX_PREFIX:
        raise ValueError(f"a prefix of 1..{_MAX_PREFIX} bytes, not {len(prefix)}")
    loads = []
    i = 0
    while i < len(prefix):
        left = len(prefix) - i
        size, op = (4, LD_W_ABS) if left >= 4 else (2, LD_H_ABS) if left >= 2 else (1, LD_B_ABS)
        loads.append((op, offset + i, int.from_bytes(prefix[i:i + size], "big")))
        i += size
    n = len(loads)
    accept = 2 * n + 3                             # index of "accept": after the length test, the compares, "drop"
    prog: Program = [(LD_W_LEN, 0, 0, 0),
                     (JGE_K, 0, accept - 2, offset + len(prefix))]       # too short to hold the prefix: keep it
    for j, (op, off, value) in enumerate(loads):
        here = 2 + 2 * j + 1                       # index of this compare
        prog.append((op, 0, 0, off))
        prog.append((JEQ_K, 0, accept - here - 1, value))                # a byte differs: keep it
    prog.append((RET_K, 0, 0, 0))                  # the whole prefix matched: drop
    prog.append((RET_K, 0, 0, _ACCEPT_ALL))
    return prog


__all__ = ["JA", "JEQ_K", "JGE_K", "LD_B_ABS", "LD_H_ABS", "LD_W_ABS", "LD_W_LEN", "RET_K", "SO_ATTACH_FILTER",
           "UDP_PAYLOAD", "Program", "attach_filter", "drop_payload_prefix"]

"""Stubs of jgpy/_core/mcread.pyx (a MethodCall's parts read from its Java object stream, in C)."""

from collections.abc import Callable
from typing import Any

MAX_SUPER_CHAIN: int

def configure(decode_mutf8: Callable[[bytes], str], text_error: type[BaseException], max_depth: int,
              long_type: type[int]) -> None: ...

class Desc:
    name: str
    flags: int
    fields: tuple[tuple[str, str], ...]
    super: Desc | None
    chain: int
    def __init__(self, name: str, flags: int) -> None: ...

class Names(list[str]): ...

class Parts:
    block: bytes
    objects: list[Any]
    def __init__(self, block: bytes, objects: list[Any]) -> None: ...

def method_call_parts(data: bytes | bytearray | memoryview, class_name: str) -> Parts | None: ...
def method_call_fields(data: bytes | bytearray | memoryview, class_name: str
                       ) -> tuple[int, str | None, list[Any], list[str] | None, int, str | None] | None: ...
def spans_held() -> int: ...

"""Stubs of jgpy/_core/mcall.pyx (a MethodCall read from and written to its Java object stream, in C)."""

from collections.abc import Callable
from typing import Any

from typing_extensions import disjoint_base

MAX_SUPER_CHAIN: int

def configure(decode_mutf8: Callable[[bytes], str], text_error: type[BaseException], max_depth: int,
              long_type: type[int]) -> None: ...

@disjoint_base
class Desc:
    name: str
    flags: int
    fields: tuple[tuple[str, str], ...]
    super: Desc | None
    chain: int
    def __init__(self, name: str, flags: int) -> None: ...

class Names(list[str]): ...

@disjoint_base
class Parts:
    block: bytes
    objects: list[Any]
    def __init__(self, block: bytes, objects: list[Any]) -> None: ...

def method_call_parts(data: bytes | bytearray | memoryview, class_name: str) -> Parts | None: ...
def method_call_fields(data: bytes | bytearray | memoryview, class_name: str
                       ) -> tuple[int, str | None, list[Any], list[str] | None, int, str | None] | None: ...
def spans_held() -> int: ...
def configure_writer(desc_info: Callable[[Any], tuple[str, bytes, Any]], class_object_desc: Callable[[str], Any],
                     java_object_type: type, jlong_type: type[int], method_call_desc: Any, object_array_desc: Any,
                     class_array_desc: Any, string_array_desc: Any, byte_array_desc: Any, box_descs: dict[str, Any],
                     nan_bits: bytes) -> None: ...
def method_call_stream(mode: int, name: str | None, method_id: int, args: tuple[Any, ...], types: list[str] | None,
                       declaring: str | None) -> bytes | None: ...

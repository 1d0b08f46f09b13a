"""A MethodCall read straight from its bytes, for the shapes remote calls send (the server's per-request work).

:func:`jgpy.blocks.methodcall.decode_method_call` tries :func:`method_call_fields` (:func:`method_call_parts`,
assembled as ``MethodCall.readExternal`` does) first. It knows one layout, the one ``MethodCall.writeExternal``
gives (block data, the ``Object[]`` of arguments, the mode, the ``Class[]`` or ``String[]`` of types, the
declaring ``Class``), with arguments that are null, String, ``byte[]`` or a boxed Integer, Long, Boolean or Double
(and back-references to those). For anything else (another type code or class, a descriptor of another layout, a
nested array, bytes that end early, text that is not modified UTF-8) it returns None and the general reader
(:class:`jgpy.javaser.ObjectInput`) reads the stream from its start and gives its value or its error. It gives
what the general reader gives for every stream it accepts, handles numbered as there
(``tests/test_javaser_fast.py`` compares both on valid and damaged streams); it reads nothing past the bytes given
and allocates nothing a length claims beyond them; descriptor super chains are cut at :data:`MAX_SUPER_CHAIN`,
and the descriptors it remembers (by their bytes) are at most 256 of at most 1 KB.

The reader itself is C (``jgpy/_core/mcall.pyx``); this module gives it what it needs from the layers above.
"""

from __future__ import annotations

import jgpy._core.mcall as _mcall
from jgpy.javaser import MAX_DEPTH, JavaSerializationError, decode_modified_utf8
from jgpy.javaser_write import BOXED_SUBCLASSES

_mcall.configure(decode_modified_utf8, JavaSerializationError, MAX_DEPTH, BOXED_SUBCLASSES["Long"])

#: how long a descriptor's super class chain may be here (Integer -> Number: 2); longer: the general reader
MAX_SUPER_CHAIN: int = _mcall.MAX_SUPER_CHAIN
method_call_parts = _mcall.method_call_parts
#: the MethodCall's fields, ``(mode, name, args, types, method_id, declaring_class)``, or None (another shape)
method_call_fields = _mcall.method_call_fields

__all__ = ["MAX_SUPER_CHAIN", "method_call_fields", "method_call_parts"]

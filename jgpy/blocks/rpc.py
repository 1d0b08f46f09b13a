"""``org.jgroups.blocks.RpcDispatcher`` (2.12): methods of a server object called on other members.

A call travels as ``Util.objectToByteBuffer(MethodCall)`` (tag 2, Java serialization: :mod:`jgpy.blocks.methodcall`)
and its answer as ``objectToByteBuffer`` of the return value or of the Throwable; so jgpy and Java members call
each other's methods. On a jgpy server, a call's method is found:

* among the methods marked with :func:`rpc_method` (Java name and parameter types; the types of a TYPES,
  SIGNATURE or METHOD call must match them, primitive and boxed names alike; an OLD call matches by name and
  number of arguments);
* else as the server's public attribute of that name, called with the arguments if they fit its signature;
* for an ID call, through ``method_lookup(id)`` (Java's MethodLookup), which returns a callable.

No method: ``java.lang.NoSuchMethodException`` at the caller (:class:`NoSuchMethodError` here), as Java.
"""

from __future__ import annotations

import inspect
from typing import Any, Callable, Collection, Sequence

from jgpy._core.address import Address
from jgpy._core.message import Message
from jgpy.blocks.correlator import GroupRequest, RequestOptions, ResponseMode, RspList
from jgpy.blocks.dispatcher import MessageDispatcher
from jgpy.blocks.methodcall import (ID, METHOD, OLD, SIGNATURE, TYPES, MethodCall, java_type_name,
                                    method_call_fields_of, typed_call_buffer)
from jgpy.channel import Channel, Receiver
from jgpy.errors import JgpyError

_BOX_OF = {"int": "java.lang.Integer", "long": "java.lang.Long", "short": "java.lang.Short",
           "byte": "java.lang.Byte", "float": "java.lang.Float", "double": "java.lang.Double",
           "boolean": "java.lang.Boolean", "char": "java.lang.Character"}


class NoSuchMethodError(JgpyError):
    """The server has no method for a call; a Java caller sees ``java.lang.NoSuchMethodException``."""

    java_class = "java.lang.NoSuchMethodException"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message
        self.stack_trace: list[Any] = []


def rpc_method(name: str | None = None, types: Sequence[str] | None = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Mark a server method as callable with Java ``name`` (default: its own) and parameter ``types``
    (``["java.lang.String", "int"]``; None: any types with the right number of arguments)."""
    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.__rpc_name__ = name or fn.__name__                                      # type: ignore[attr-defined]
        fn.__rpc_types__ = [java_type_name(t) for t in types] if types is not None else None  # type: ignore
        return fn
    return mark


def _same_type(a: str, b: str) -> bool:
    return a == b or _BOX_OF.get(a) == b or _BOX_OF.get(b) == a


#: the most (name, mode, types, arity) -> method lookups a server remembers (the keys come from the callers)
MAX_REMEMBERED_LOOKUPS = 256


class _MethodTable:
    """The server's marked methods by Java name, and the lookups made so far: a call finds its method once per
    (name, mode, types, number of arguments), as Java's RpcDispatcher caches its Method lookups; an unmarked
    method's signature check (``inspect.signature``, ~15 us) is not repeated for every call."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.by_name: dict[str, list[tuple[Callable[..., Any], list[str] | None]]] = {}
        for attr in dir(type(server)):
            fn = getattr(type(server), attr, None)
            rpc_name = getattr(fn, "__rpc_name__", None)
            if rpc_name is not None and fn is not None:
                self.by_name.setdefault(rpc_name, []).append((getattr(server, attr), fn.__rpc_types__))
        self._found: dict[tuple[Any, ...], Callable[..., Any]] = {}

    def find(self, name: str | None, mode: int, types: list[str] | None, args: list[Any]) -> Callable[..., Any]:
        """The method for a call of ``name`` in ``mode`` with parameter ``types`` and arguments ``args``."""
        key = (name, mode, tuple(types) if types is not None else None, len(args))
        fn = self._found.get(key)
        if fn is None:
            fn = self._look_up(name or "", mode, types, args)   # a method that is not there is not remembered
            if len(self._found) >= MAX_REMEMBERED_LOOKUPS:
                self._found.clear()
            self._found[key] = fn
        return fn

    def _look_up(self, name: str, mode: int, call_types: list[str] | None, args: list[Any]) -> Callable[..., Any]:
        n = len(args)
        for fn, types in self.by_name.get(name, ()):
            if types is None:
                if _fits(fn, n):
                    return fn
                continue
            if len(types) != n:
                continue
            if mode in (TYPES, SIGNATURE, METHOD) and call_types is not None:
                if all(_same_type(t, u) for t, u in zip(types, call_types)):
                    return fn
            elif mode == OLD:
                return fn
        if not self.by_name.get(name) and not name.startswith("_"):
            attr: Callable[..., Any] | None = getattr(self.server, name, None)
            if callable(attr) and _fits(attr, n):
                return attr
        sig = ", ".join(call_types) if call_types else ", ".join(type(a).__name__ for a in args)
        raise NoSuchMethodError(f"found no method called {name} in class {type(self.server).__name__} with "
                                f"({sig}) formal parameters")


def _fits(fn: Callable[..., Any], n: int) -> bool:
    try:
        inspect.signature(fn).bind(*([None] * n))
        return True
    except (TypeError, ValueError):
        return False


class RpcDispatcher(MessageDispatcher):
    """Calls methods of ``server`` objects on the members (Java's RpcDispatcher): :meth:`call_remote_methods`,
    :meth:`call_remote_method`, their ``_with_future`` variants; answers calls to ``server``'s methods.
    ``method_lookup(id)`` maps the id of an ID-mode call to a callable."""

    def __init__(self, channel: Channel, server: Any = None, receiver: Receiver | None = None,
                 method_lookup: Callable[[int], Callable[..., Any] | None] | None = None,
                 max_outstanding: int = 100_000) -> None:
        self.server = server
        self.method_lookup = method_lookup
        #: calls whose MethodCall could not be read (answered with the error)
        self.malformed_calls = 0
        self._table = _MethodTable(server) if server is not None else None
        super().__init__(channel, self, receiver, max_outstanding)

    # ---- serving

    def handle(self, msg: Message) -> Any:
        """Run the MethodCall in ``msg`` on the server object; its value, or the exception (returned, as Java)."""
        if self._table is None and self.method_lookup is None:
            return NoSuchMethodError("no server object is registered")
        data = msg.buffer
        if not data:
            return ValueError("the request carries no MethodCall")
        try:
            mode, name, args, types, method_id, _ = method_call_fields_of(data)
        except Exception as e:  # noqa: BLE001 - any malformed call is an answer to its caller, not a failure here
            self.malformed_calls += 1
            return e
        if mode == ID:
            fn = self.method_lookup(method_id) if self.method_lookup is not None else None
            if fn is None:
                return NoSuchMethodError(f"no method found for id {method_id}")
        elif self._table is None:
            return NoSuchMethodError(f"no server object for {name}: this dispatcher serves calls by id only")
        else:
            fn = self._table.find(name, mode, types, args)
        return fn(*args)

    # ---- calling

    def _buffer(self, method: str | MethodCall, args: Sequence[Any], types: Sequence[str] | None) -> bytes:
        """The request's payload: ``objectToByteBuffer`` of the call (a value that cannot be written fails here)."""
        if isinstance(method, MethodCall):
            return method.to_buffer()
        if types is not None:
            return typed_call_buffer(method, args, types)
        return MethodCall.old(method, list(args)).to_buffer()

    def call_remote_methods_with_future(self, dests: Collection[Address] | None, method: str | MethodCall,
                                        args: Sequence[Any] = (), types: Sequence[str] | None = None,
                                        options: RequestOptions | None = None) -> GroupRequest:
        """:meth:`call_remote_methods` without waiting: the request (a future of the RspList)."""
        buf = self._buffer(method, args, types)
        return self.cast_message_with_future(dests, Message(None, buf), options or RequestOptions())

    def call_remote_methods(self, dests: Collection[Address] | None, method: str | MethodCall,
                            args: Sequence[Any] = (), types: Sequence[str] | None = None,
                            options: RequestOptions | None = None) -> RspList:
        """Call ``method`` (a name, or a prepared :class:`MethodCall` for the other modes) with ``args`` on
        ``dests`` (None: every member). ``types`` (Java class names) make it a TYPES call and say how each
        argument is written (``long`` -> Long, ``float`` -> Float ...). The result maps each member to its
        value, its exception, or not received / suspected."""
        if dests is not None and len(dests) == 0:
            return RspList()
        options = options or RequestOptions()
        buf = self._buffer(method, args, types)
        return self.cast_message(dests, Message(None, buf), options)

    def call_remote_method(self, dest: Address, method: str | MethodCall, args: Sequence[Any] = (),
                           types: Sequence[str] | None = None, timeout: int = 5000,
                           options: RequestOptions | None = None) -> Any:
        """The value ``method`` returns on ``dest``; raises the exception it raised there (a
        :class:`~jgpy.javaser_values.JavaException` from Java), :class:`SuspectedError`, or TimeoutError after
        ``timeout`` ms (``options``, if given, wins)."""
        opts = options or RequestOptions(ResponseMode.GET_ALL, timeout)
        buf = self._buffer(method, args, types)
        return self.send_message(Message(dest, buf), opts)

    def call_remote_method_with_future(self, dest: Address, method: str | MethodCall, args: Sequence[Any] = (),
                                       types: Sequence[str] | None = None, timeout: int = 5000,
                                       options: RequestOptions | None = None) -> GroupRequest:
        opts = options or RequestOptions(ResponseMode.GET_ALL, timeout)
        buf = self._buffer(method, args, types)
        return self.send_message_with_future(Message(dest, buf), opts)


__all__ = ["NoSuchMethodError", "RpcDispatcher", "rpc_method"]

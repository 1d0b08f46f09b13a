"""jgpy objects <-> the JSON values of the Java interop harness (schema in ``interop/PROTOCOL.md``).

Used by golden tests: a value built in Python is sent to the Java classes with ``encode``, and what the
Java classes decoded comes back in the same shape, so both sides can be compared field by field.
"""

from __future__ import annotations

import math
import socket
from typing import Any

from jgpy import (AdditionalDataUUID, Digest, IpAddress, JoinRsp, MergeId, MergeView, Message, PayloadUUID,
                  PingData, Range, TopologyUUID, UUID, View, ViewId)
from jgpy._core import wirespec
from jgpy._core.headers import Header
from jgpy._core.jg212 import DIALECT, JavaObject

_ADDRESS_CLASSES = {UUID: "util.UUID", PayloadUUID: "util.PayloadUUID", AdditionalDataUUID: "util.AdditionalDataUUID",
                    TopologyUUID: "util.TopologyUUID", IpAddress: "stack.IpAddress"}


def _hex(b: bytes | None) -> str | None:
    return None if b is None else bytes(b).hex()


def _unhex(s: str | None) -> bytes | None:
    return None if s is None else bytes.fromhex(s)


def _list(seq):
    return None if seq is None else [to_json(x) for x in seq]


def to_json(obj: Any) -> Any:
    """A jgpy value as a harness JSON value."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    t = type(obj)
    if t in _ADDRESS_CLASSES:
        d: dict[str, Any] = {"class": _ADDRESS_CLASSES[t]}
        if t is IpAddress:
            d.update(host=obj.host, scope_id=obj.scope_id, port=obj.port)
        else:
            d.update(msb=obj.msb, lsb=obj.lsb)
            if t is PayloadUUID:
                d["payload"] = obj.payload
            elif t is AdditionalDataUUID:
                d["payload"] = _hex(obj.payload)
            elif t is TopologyUUID:
                d.update(site_id=obj.site_id, rack_id=obj.rack_id, machine_id=obj.machine_id)
        d["additional_data"] = _hex(obj.additional_data)
        return d
    if t is ViewId:
        return {"class": "ViewId", "coord_addr": to_json(obj.coord_addr), "id": obj.id}
    if t in (View, MergeView):
        d = {"class": "MergeView" if t is MergeView else "View", "vid": to_json(obj.vid),
             "members": _list(obj.members), "payload": _hex(obj.payload)}
        if t is MergeView:
            d["subgroups"] = _list(obj.subgroups)
        return d
    if t is Digest:
        return {"class": "util.Digest", "entries": [[to_json(a), lo, hd, hr] for a, lo, hd, hr in obj.entries()]}
    if t is JoinRsp:
        return {"class": "protocols.pbcast.JoinRsp", "view": to_json(obj.view), "digest": to_json(obj.digest),
                "fail_reason": obj.fail_reason}
    if t is MergeId:
        return {"class": "util.MergeId", "initiator": to_json(obj.initiator), "id": obj.id}
    if t is PingData:
        return {"class": "protocols.PingData", "own_addr": to_json(obj.own_addr), "view": to_json(obj.view),
                "view_id": to_json(obj.view_id), "is_server": obj.is_server, "logical_name": obj.logical_name,
                "physical_addrs": _list(obj.physical_addrs)}
    if t is Range:
        return {"class": "util.Range", "low": obj.low, "high": obj.high}
    if t is Message:
        return {"class": "Message", "dest": to_json(obj.dest), "src": to_json(obj.src), "flags": obj.flags,
                "buf": _hex(obj.buffer), "headers": [[pid, to_json(h)] for pid, h in obj.headers]}
    if isinstance(obj, Header):         # the fields of the dialect spec, by their Java names
        d = {"class": DIALECT.java_class(obj)}
        for f in DIALECT.header_spec(obj).all_fields:
            v = getattr(obj, f.name)
            if v is not None and _rows(f):
                d[f.json_name] = [[to_json(x) for x in row] for row in v]
            elif v is not None and isinstance(f.wire, wirespec.OptStruct):      # bytes as hex
                d[f.json_name] = [_hex(x) if isinstance(x, bytes) else to_json(x) for x in v]
            elif v is not None and isinstance(f.wire, wirespec.Tagged):      # (class name, body): bytes as hex;
                known = f.wire.body_wire(v[0]) is not None or v[0] in dict(f.wire.cases)   # a class Java does
                d[f.json_name] = [v[0], _hex(v[1]) if isinstance(v[1], bytes) else v[1]] if known else None  # not know
            else:
                d[f.json_name] = _list(v) if isinstance(v, tuple) else to_json(v)
        return d
    if isinstance(obj, JavaObject):
        v = obj.value
        if obj.type in ("byte[]", "Serializable"):
            v = _hex(v)
        elif obj.type == "Streamable":
            v = to_json(v)
        elif obj.type in ("Float", "Double") and not math.isfinite(v):
            v = "NaN" if math.isnan(v) else ("Infinity" if v > 0 else "-Infinity")
        return {"class": "JavaObject", "type": obj.type, "value": v}
    if isinstance(obj, float):
        return obj
    raise TypeError(f"no JSON mapping for {t.__name__}")


def _rows(f: wirespec.Field) -> bool:
    """A list of structs (FD_SOCK's cache: address and IpAddress): JSON lists of lists."""
    return isinstance(f.wire, wirespec.ListOf) and isinstance(f.wire.elem, wirespec.Struct)


_CLASS_HEADERS = {}


def _header_classes():
    if not _CLASS_HEADERS:
        for magic, typ in DIALECT.header_types().items():
            _CLASS_HEADERS[DIALECT.java_class(typ)] = typ
    return _CLASS_HEADERS


def from_json(v: Any) -> Any:
    """A harness JSON value as a jgpy value."""
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, list):
        return [from_json(x) for x in v]
    cls = v["class"]
    ad = _unhex(v.get("additional_data"))
    if cls == "util.UUID":
        return UUID(v["msb"], v["lsb"], ad)
    if cls == "util.PayloadUUID":
        return PayloadUUID(v["msb"], v["lsb"], v["payload"], ad)
    if cls == "util.AdditionalDataUUID":
        return AdditionalDataUUID(v["msb"], v["lsb"], _unhex(v["payload"]), ad)
    if cls == "util.TopologyUUID":
        return TopologyUUID(v["msb"], v["lsb"], v["site_id"], v["rack_id"], v["machine_id"], ad)
    if cls == "stack.IpAddress":
        host = v["host"]
        ip = None
        if host is not None:
            fam = socket.AF_INET6 if ":" in host else socket.AF_INET
            ip = socket.inet_pton(fam, host)
        return IpAddress(ip, v["port"], v.get("scope_id"), ad)
    if cls == "ViewId":
        return ViewId(from_json(v["coord_addr"]), v["id"])
    if cls == "View":
        return View(from_json(v["vid"]), _members(v["members"]), _unhex(v["payload"]))
    if cls == "MergeView":
        subs = None if v["subgroups"] is None else [from_json(s) for s in v["subgroups"]]
        return MergeView(from_json(v["vid"]), _members(v["members"]), subs, _unhex(v["payload"]))
    if cls == "util.Digest":
        return Digest([(from_json(a), lo, hd, hr) for a, lo, hd, hr in v["entries"]])
    if cls == "protocols.pbcast.JoinRsp":
        return JoinRsp(from_json(v["view"]), from_json(v["digest"]), v["fail_reason"])
    if cls == "util.MergeId":
        return MergeId(from_json(v["initiator"]), v["id"])
    if cls == "protocols.PingData":
        return PingData(from_json(v["own_addr"]), from_json(v["view"]), from_json(v["view_id"]), v["is_server"],
                        v["logical_name"], _members(v["physical_addrs"]))
    if cls == "util.Range":
        return Range(v["low"], v["high"])
    if cls == "Message":
        m = Message(from_json(v["dest"]), _unhex(v["buf"]), from_json(v["src"]), v["flags"])
        for pid, h in v["headers"]:
            m.put_header(pid, from_json(h))
        return m
    if cls == "JavaObject":
        val = v["value"]
        if v["type"] in ("byte[]", "Serializable"):
            val = _unhex(val)
        elif v["type"] == "Streamable":
            val = from_json(val)
        elif v["type"] in ("Float", "Double") and isinstance(val, str):
            val = float(val.replace("Infinity", "inf"))
        return JavaObject(v["type"], val)
    typ = _header_classes().get(cls)
    if typ is None:
        raise ValueError(f"unknown class {cls!r}")
    args = []
    for f in DIALECT.header_spec(typ).all_fields:
        x = v[f.json_name]
        if x is not None and _rows(f):
            args.append([tuple(from_json(e) for e in row) for row in x])
        elif x is not None and isinstance(f.wire, wirespec.OptStruct):
            args.append(tuple(_unhex(e) if g.wire is wirespec.INT_BYTES else from_json(e)
                              for g, e in zip(f.wire.fields, x)))
        elif x is not None and isinstance(f.wire, wirespec.Tagged):
            body = _unhex(x[1]) if f.wire.body_wire(x[0]) is wirespec.BYTE_BUFFER else x[1]
            args.append((x[0], body))
        else:
            args.append(from_json(x))
    return typ(*args)


def _members(v):
    return None if v is None else [from_json(x) for x in v]

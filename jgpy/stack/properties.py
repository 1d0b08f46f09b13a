"""Protocol properties: typed, documented, set from XML attributes exactly as JGroups reads them.

A protocol declares ``name = Property(converter, default, "doc")`` class attributes. Values from a
stack file are strings converted the way JGroups 2.12 converts them (``"64K"`` is 64000 bytes,
``"300,600,1200"`` a list of longs, ...). JGroups properties that jgpy accepts but does not act on
are declared with :func:`ignored` (and those 2.12 itself declares deprecated with ``DEPRECATED_PROPERTIES``) and
produce one warning each; anything else is a configuration error.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from typing import Any, Callable

from jgpy.errors import ConfigError

log = logging.getLogger("jgpy.config")

_SIZE = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*([kmg]b?)?\s*$", re.I)
_SIZE_FACTORS = {None: 1, "k": 1000, "kb": 1000, "m": 1000 ** 2, "mb": 1000 ** 2, "g": 1000 ** 3, "gb": 1000 ** 3}


def to_bool(s: str) -> bool:
    v = s.strip().lower()
    if v in ("true", "yes", "on", "1"):
        return True
    if v in ("false", "no", "off", "0"):
        return False
    raise ValueError(f"{s!r} is not a boolean (true/false)")


def to_int(s: str) -> int:
    return int(s.strip())


def to_size(s: str) -> int:
    """JGroups ``Util.readBytesLong``: ``"64K"`` -> 64000, ``"20M"`` -> 20000000 (decimal factors)."""
    m = _SIZE.match(s)
    if not m:
        raise ValueError(f"{s!r} is not a size (a number with an optional K/M/G suffix)")
    return int(float(m.group(1)) * _SIZE_FACTORS[(m.group(2) or "").lower() or None])


def to_float(s: str) -> float:
    return float(s.strip())


def to_str(s: str) -> str:
    return s


def to_longs(s: str) -> list[int]:
    """``"300,600,1200"`` -> [300, 600, 1200]."""
    vals = [to_int(p) for p in s.split(",") if p.strip()]
    if not vals:
        raise ValueError(f"{s!r} is not a comma-separated list of numbers")
    return vals


def to_str_list(s: str) -> list[str]:
    return [p.strip() for p in s.split(",") if p.strip()]


@dataclass
class Property:
    """A configurable protocol property (the Python side of JGroups' ``@Property``)."""

    converter: Callable[[str], Any]
    default: Any
    doc: str = ""
    name: str = ""
    deprecated: str | None = None
    system_property: tuple[str, ...] = ()   # system properties that override the XML value (JGroups semantics)
    aliases: tuple[str, ...] = ()           # other names 2.12 accepts (its field's name, when @Property names it)

    def __set_name__(self, owner, name: str) -> None:
        if not self.name:
            self.name = name
        self.attr = name

    # A non-data descriptor: a value set on the instance (every protocol gets its defaults in
    # ``Protocol.__init__``) shadows it, so reading a property in a hot path is a plain attribute lookup.
    def __get__(self, obj, owner=None):
        if obj is None:
            return self
        value = list(self.default) if isinstance(self.default, list) else self.default
        obj.__dict__[self.attr] = value
        return value

    def fresh_default(self) -> Any:
        return list(self.default) if isinstance(self.default, list) else self.default


#: 2.12's level names (log4j's, and java.util.logging's) -> logging levels
_LOG_LEVELS = {"trace": 5, "debug": logging.DEBUG, "info": logging.INFO, "warn": logging.WARNING,
               "error": logging.ERROR, "fatal": logging.CRITICAL, "finest": 5, "finer": 5, "fine": logging.DEBUG,
               "config": logging.INFO, "warning": logging.WARNING, "severe": logging.ERROR,
               "off": logging.CRITICAL + 10, "all": 1}


def to_log_level(s: str) -> int:
    level = _LOG_LEVELS.get(s.strip().lower())
    if level is None:
        raise ValueError(f"{s!r} is not a log level ({', '.join(_LOG_LEVELS)})")
    return level


class LogLevelProperty(Property):
    """``level``: setting it sets the level of the protocol's logger (``obj.log``), as 2.12's ``setLevel``."""

    def __get__(self, obj, owner=None):
        return self if obj is None else obj.__dict__.get(self.attr, self.default)

    def __set__(self, obj, value) -> None:
        obj.__dict__[self.attr] = value
        if value is not None:
            obj.log.setLevel(value)


class CoreProperty(Property):
    """A property whose value lives in the typed field of the same name of the C core the protocol class derives
    from (e.g. ``NAKACK(NakackCore, Protocol)``): the core reads it in C, and there is no second copy to keep in
    step. Reads and writes go to that field (a data descriptor); the default is set there by
    ``Protocol.__init__``."""

    def __set_name__(self, owner, name: str) -> None:
        super().__set_name__(owner, name)
        field = next((vars(base)[name] for base in owner.__mro__[1:] if name in vars(base)), None)
        if not hasattr(type(field), "__set__"):
            raise TypeError(f"{owner.__name__}.{name}: CoreProperty needs a core field {name!r} in a base class")
        self.field = field

    def __get__(self, obj, owner=None):
        return self if obj is None else self.field.__get__(obj, owner)

    def __set__(self, obj, value) -> None:
        self.field.__set__(obj, value)


def ignored(reason: str) -> str:
    """Mark a JGroups property jgpy accepts without acting on it (a warning names the reason)."""
    return reason


def properties_of(cls) -> dict[str, Property]:
    """``{xml name: Property}`` of a protocol class, including inherited ones."""
    out: dict[str, Property] = {}
    for klass in reversed(cls.__mro__):
        for attr, val in vars(klass).items():
            if isinstance(val, Property):
                out[val.name] = val
    return out


def aliases_of(cls) -> dict[str, Property]:
    """``{other name: Property}``: the names 2.12 also accepts for a property (see ``Property.aliases``)."""
    return {a: p for p in properties_of(cls).values() for a in p.aliases}


def ignored_properties_of(cls) -> dict[str, str]:
    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        out.update(getattr(klass, "IGNORED_PROPERTIES", {}) or {})
    return out


def deprecated_properties_of(cls) -> set[str]:
    """The names 2.12 lists in ``@DeprecatedProperty`` for a class and its bases: accepted and ignored."""
    out: set[str] = set()
    for klass in cls.__mro__:
        out.update(getattr(klass, "DEPRECATED_PROPERTIES", ()) or ())
    return out


def apply_properties(protocol, values: dict[str, str], where: str = "", overrides=None) -> None:
    """Set ``values`` (XML attribute strings) on a protocol instance; warn about ignored ones,
    reject unknown ones with an error that names the protocol and the file.

    A property with ``system_property`` names takes the first of them that is set, in preference to
    the XML value (``-Djgroups.bind_addr`` beats ``bind_addr="..."``, as in JGroups)."""
    from jgpy.stack.config import get_system_property

    cls = type(protocol)
    props = properties_of(cls)
    values = dict(values)
    for key, prop in props.items():
        for sp in prop.system_property:
            v = get_system_property(sp, overrides)
            if v is not None:
                values[key] = v
                break
    ignored_props = ignored_properties_of(cls)
    prefix_ignored = getattr(cls, "IGNORED_PREFIXES", {}) or {}
    deprecated = deprecated_properties_of(cls)
    unknown = []
    no_effect: dict[str, list[str]] = {}
    aliases = aliases_of(cls)
    for key, raw in values.items():
        prop = props.get(key) or aliases.get(key)
        if prop is not None:
            try:
                setattr(protocol, prop.attr, prop.converter(raw))
            except (ValueError, TypeError) as e:
                raise ConfigError(f"{where}{cls.NAME}: property {key}={raw!r}: {e}") from None
            if prop.deprecated:
                log.warning("%s%s: property %s is deprecated in JGroups 2.12 (%s)", where, cls.NAME, key, prop.deprecated)
            continue
        reason = ignored_props.get(key)
        if reason is None and key in deprecated:
            reason = "deprecated in JGroups 2.12, which ignores it too"
        if reason is None:
            for pre, why in prefix_ignored.items():
                if key.startswith(pre):
                    reason = why
                    break
        if reason is not None:
            no_effect.setdefault(reason, []).append(key)
            continue
        unknown.append(key)
    if no_effect:
        log.warning("%s%s: %s", where, cls.NAME, "; ".join(
            f"{', '.join(keys)}: no effect in jgpy ({reason})" for reason, keys in no_effect.items()))
    if unknown:
        known = ", ".join(sorted(props))
        raise ConfigError(f"{where}{cls.NAME}: unknown propert{'y' if len(unknown) == 1 else 'ies'} "
                          f"{', '.join(sorted(unknown))} (JGroups 2.12 rejects unknown properties too). "
                          f"Known: {known}")

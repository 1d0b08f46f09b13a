"""Load JGroups XML stack configurations unchanged (``udp.xml``, ``tcp.xml``, ...).

A config names its protocols bottom-up (transport first); each element's attributes are the protocol's
properties. ``${name:default}`` (and ``${a,b:default}``) is replaced by the first of the named system
properties that is set, else the default, as JGroups' ``Util.substituteVariable`` does. jgpy's system
properties are process-wide like Java's (:func:`set_system_property`), can be overridden per channel,
and fall back to environment variables (``jgroups.udp.mcast_port`` -> ``JGROUPS_UDP_MCAST_PORT``).

Where a name like ``udp.xml`` is not a file, it is looked up in the Java jar
(``/usr/share/java/jgroups.jar`` or ``$JGPY_JGROUPS_JAR``), then among jgpy's own configs
(``jgpy/conf``), so ``Channel("udp.xml")`` means what it means to a Java node on the same machine.
"""

from __future__ import annotations

import os
import threading
import xml.parsers.expat
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Mapping

from jgpy.errors import ConfigError

_sys_props: dict[str, str] = {}
_sys_lock = threading.Lock()
JAR_PATH = Path(os.environ.get("JGPY_JGROUPS_JAR", "/usr/share/java/jgroups.jar"))
BUNDLED = Path(__file__).resolve().parents[1] / "conf"


def set_system_property(name: str, value: str | None) -> None:
    """Set (or with None, clear) a process-wide property, like Java's ``System.setProperty``."""
    with _sys_lock:
        if value is None:
            _sys_props.pop(name, None)
        else:
            _sys_props[name] = str(value)


def get_system_property(name: str, overrides: Mapping[str, str] | None = None) -> str | None:
    """Channel overrides, then process-wide properties, then the environment (dots -> underscores)."""
    if overrides and name in overrides:
        return str(overrides[name])
    with _sys_lock:
        if name in _sys_props:
            return _sys_props[name]
    return os.environ.get(name.upper().replace(".", "_").replace("-", "_"))


def substitute(value: str, overrides: Mapping[str, str] | None = None) -> str:
    """Replace every ``${var[,var2...][:default]}`` in ``value`` (JGroups semantics: unresolved stays as is)."""
    out = value
    while "${" in out:
        start = out.index("${")
        end = out.find("}", start + 2)
        if end < 0:
            raise ConfigError(f'missing "}}" in {value!r}')
        expr = out[start + 2:end]
        var, sep, default = expr.partition(":")
        resolved = None
        for name in (v.strip() for v in var.split(",")):
            if name:
                resolved = get_system_property(name, overrides)
                if resolved is not None:
                    break
        if resolved is None and sep:
            resolved = default.strip()
        if resolved is None:
            break
        out = out[:start] + resolved + out[end + 1:]
    return out


@dataclass
class ProtocolConfig:
    """One protocol of a stack config: its name as written (``pbcast.NAKACK``) and its properties."""

    name: str
    properties: dict[str, str] = field(default_factory=dict)
    source: str = ""
    line: int = 0

    @property
    def where(self) -> str:
        return f"{self.source}:{self.line}: " if self.source else ""


@dataclass
class StackConfig:
    protocols: list[ProtocolConfig]
    source: str = ""

    def names(self) -> list[str]:
        return [p.name for p in self.protocols]

    def get(self, name: str) -> ProtocolConfig | None:
        for p in self.protocols:
            if p.name == name:
                return p
        return None

    # ---- editing (tests and tools build variants of the stock stacks) ----

    def copy(self) -> "StackConfig":
        return StackConfig([ProtocolConfig(p.name, dict(p.properties), p.source, p.line) for p in self.protocols],
                           self.source)

    def _index(self, name: str) -> int:
        for i, p in enumerate(self.protocols):
            if p.name == name:
                return i
        raise ConfigError(f"{self.source}: no protocol {name!r} in {self.names()}")

    def insert(self, name: str, properties: Mapping[str, str] | None = None, *, after: str | None = None,
               before: str | None = None) -> "StackConfig":
        """A copy with protocol ``name`` added right above ``after`` (or below ``before``)."""
        out = self.copy()
        idx = out._index(after) + 1 if after else out._index(before) if before else len(out.protocols)
        out.protocols.insert(idx, ProtocolConfig(name, {k: str(v) for k, v in (properties or {}).items()}))
        return out

    def replace(self, old: str, name: str, properties: Mapping[str, str] | None = None) -> "StackConfig":
        out = self.copy()
        out.protocols[out._index(old)] = ProtocolConfig(name, {k: str(v) for k, v in (properties or {}).items()})
        return out

    def remove(self, name: str) -> "StackConfig":
        out = self.copy()
        del out.protocols[out._index(name)]
        return out

    def with_properties(self, name: str, **properties: object) -> "StackConfig":
        out = self.copy()
        out.protocols[out._index(name)].properties.update({k: str(v) for k, v in properties.items()})
        return out

    def to_xml(self) -> str:
        """The config as a JGroups XML document (loadable by Java and jgpy alike)."""
        from xml.sax.saxutils import quoteattr
        lines = ['<config xmlns="urn:org:jgroups">']
        for p in self.protocols:
            attrs = "".join(f" {k}={quoteattr(v)}" for k, v in p.properties.items())
            lines.append(f"    <{p.name}{attrs}/>")
        lines.append("</config>")
        return "\n".join(lines) + "\n"


def _read_text(spec: str) -> tuple[str, str]:
    """Find the XML for ``spec``: a file, a resource of the Java jar, or a jgpy bundled config."""
    path = Path(spec).expanduser()
    if path.is_file():
        return path.read_text(encoding="utf-8"), str(path)
    if "/" not in spec and JAR_PATH.is_file():
        try:
            with zipfile.ZipFile(JAR_PATH) as jar:
                return jar.read(spec).decode("utf-8"), f"{JAR_PATH}!/{spec}"
        except KeyError:
            pass
        except (OSError, zipfile.BadZipFile) as e:
            raise ConfigError(f"cannot read {spec} from {JAR_PATH}: {e}") from None
    bundled = BUNDLED / spec
    if "/" not in spec and bundled.is_file():
        return bundled.read_text(encoding="utf-8"), str(bundled)
    raise ConfigError(f"stack config {spec!r} not found: not a file, not in {JAR_PATH}, not in {BUNDLED}. "
                      "Pass the path of a JGroups XML config (e.g. a copy of the jar's udp.xml)")


def parse_xml(text: str, source: str = "<string>") -> StackConfig:
    """Parse a JGroups ``<config>`` document; the children of the root are the protocols, bottom first."""
    protocols: list[ProtocolConfig] = []
    depth = 0
    parser = xml.parsers.expat.ParserCreate(namespace_separator="}")

    def start(name: str, attrs: dict[str, str]) -> None:
        nonlocal depth
        depth += 1
        local = name.rsplit("}", 1)[-1]
        if depth == 1:
            if local != "config":
                raise ConfigError(f"{source}:{parser.CurrentLineNumber}: root element is <{local}>, "
                                  "expected a JGroups <config>")
            return
        if depth == 2:
            # values stay as written (``${...}`` included): they are resolved when a stack is built, so one
            # parsed config serves channels with different properties and round-trips through to_xml()
            props = {k.rsplit("}", 1)[-1]: v for k, v in attrs.items()}
            protocols.append(ProtocolConfig(local, props, source, parser.CurrentLineNumber))

    def end(name: str) -> None:
        nonlocal depth
        depth -= 1

    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(text, True)
    except xml.parsers.expat.ExpatError as e:
        raise ConfigError(f"{source}: not well-formed XML: {e}") from None
    if not protocols:
        raise ConfigError(f"{source}: the config has no protocols")
    return StackConfig(protocols, source)


def load_config(spec: str | StackConfig) -> StackConfig:
    """A :class:`StackConfig` from a file name, a jar resource name (``"udp.xml"``) or XML text."""
    if isinstance(spec, StackConfig):
        return spec
    if spec.lstrip().startswith("<"):
        return parse_xml(spec, "<string>")
    text, source = _read_text(spec)
    return parse_xml(text, source)


def resolve_properties(pc: ProtocolConfig, overrides: Mapping[str, str] | None = None) -> dict[str, str]:
    """The properties of ``pc`` with every ``${...}`` substituted."""
    out = {}
    for k, v in pc.properties.items():
        try:
            out[k] = substitute(v, overrides)
        except ConfigError as e:
            raise ConfigError(f"{pc.where}{pc.name}.{k}: {e}") from None
    return out

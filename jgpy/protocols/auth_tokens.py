"""AUTH's tokens: the ``org.jgroups.auth`` classes of JGroups 2.12.2, by their Java class names.

A token is configured from AUTH's XML attributes (2.12's property names), put on the wire in an ``AuthHeader`` as
``(Java class name, body)`` (see ``AUTH_TOKEN`` in ``jgpy/_core/spec212.py``) and, on the coordinator, checks the
token a joiner sent (:meth:`AuthToken.authenticate`):

=====================================  ==========================================  ==================================
class (``auth_class``)                 properties                                  accepts a joiner when
=====================================  ==========================================  ==================================
``org.jgroups.auth.SimpleToken``       ``auth_value``                              its token is a SimpleToken with
                                                                                   the same value (case ignored)
``org.jgroups.auth.MD5Token``          ``auth_value``, ``token_hash`` (MD5/SHA)    likewise, an MD5Token
``org.jgroups.auth.FixedMembershipToken``  ``fixed_members_value``,                its physical address (host, or
                                       ``fixed_members_seperator`` (sic)           host/port) is in the list
``org.jgroups.auth.RegexMembership``   ``match_string``, ``match_ip_address``,     its physical address (host:port)
                                       ``match_logical_name``                      or logical name matches
``org.jgroups.auth.X509Token``         ``auth_value``, ``keystore_type``,          its RSA-encrypted value decrypts
                                       ``keystore_path``, ``keystore_password``,   with our private key to our
                                       ``cert_alias``, ``cert_password``,          value (case ignored)
                                       ``cipher_type`` (RSA)
=====================================  ==========================================  ==================================

2.12's MD5Token hashes its value only in a constructor that a config never calls: configured from XML it sends
``auth_value`` as it is (``token_hash`` has no effect). jgpy does the same, or a Java coordinator would refuse
it. None of these tokens is a secret on the wire except X509Token's (see docs/SECURITY.md).
"""

from __future__ import annotations

import re
from typing import Any, Callable, ClassVar

from jgpy.errors import ConfigError
from jgpy.stack.properties import to_bool

#: what FixedMembershipToken writes, always
FIXED_MEMBERSHIP_BODY = "emptyToken"


def java_equals_ignore_case(a: str | None, b: str | None) -> bool:
    """``String.equalsIgnoreCase``: the same length in UTF-16 units and, char by char, equal, equal in upper case
    or equal in lower case (one char each: Java maps chars, not strings)."""
    if a is None or b is None:
        return False
    if len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x == y:
            continue
        ux, uy = _upper(x), _upper(y)
        if ux != uy and ux.lower()[:1] != uy.lower()[:1]:
            return False
    return True


def _upper(c: str) -> str:
    u = c.upper()
    return u if len(u) == 1 else c


def java_host_address(addr: Any) -> str:
    """``InetAddress.getHostAddress()`` of an IpAddress: a dotted quad, or eight hex groups without compression."""
    ip = addr.ip
    if ip is None:
        return "<null>"
    if len(ip) == 4:
        return ".".join(str(b) for b in ip)
    text = ":".join(f"{(ip[i] << 8) | ip[i + 1]:x}" for i in range(0, 16, 2))
    return f"{text}%{addr.scope_id}" if addr.scope_id else text


def java_ip_string(addr: Any) -> str:
    """``IpAddress.toString()`` (without ``-Dresolve.dns``): host address, a colon, the port."""
    return f"{java_host_address(addr)}:{addr.port}"


class AuthToken:
    """A token: ``NAME`` is its Java class name, ``PROPERTIES`` its 2.12 property names (with their converters)."""

    NAME: ClassVar[str] = ""
    PROPERTIES: ClassVar[dict[str, Callable[[str], Any]]] = {}

    def __init__(self, props: dict[str, str]) -> None:
        for key, conv in self.PROPERTIES.items():
            attr = key.replace("fixed_members_separator", "fixed_members_seperator")
            if key in props:
                setattr(self, attr, conv(props[key]))
            elif not hasattr(self, attr):
                setattr(self, attr, None)

    def init(self) -> None:
        """Check the configuration (AUTH's init)."""

    def body(self) -> Any:
        """What this token writes after its class name."""
        return None

    def authenticate(self, token: tuple | None, src: Any, auth: Any) -> bool:
        """Whether the joiner ``src``, which sent ``token`` (``(class name, body)`` or None), may join; ``auth`` is
        the AUTH protocol (physical addresses, logical names)."""
        raise NotImplementedError


class SimpleToken(AuthToken):
    NAME = "org.jgroups.auth.SimpleToken"
    PROPERTIES = {"auth_value": str}
    auth_value: str | None

    def init(self) -> None:
        if self.auth_value is None:
            raise ConfigError(f"AUTH: {self.NAME} needs auth_value")

    def body(self) -> Any:
        return self.auth_value

    def authenticate(self, token: tuple | None, src: Any, auth: Any) -> bool:
        return token is not None and token[0] == self.NAME and java_equals_ignore_case(self.auth_value, token[1])


class MD5Token(SimpleToken):
    NAME = "org.jgroups.auth.MD5Token"
    PROPERTIES = {"auth_value": str, "token_hash": str}
    token_hash = "MD5"


class FixedMembershipToken(AuthToken):
    NAME = "org.jgroups.auth.FixedMembershipToken"
    PROPERTIES = {"fixed_members_seperator": str, "fixed_members_separator": str, "fixed_members_value": str}
    fixed_members_seperator = ","
    fixed_members_value: str | None

    def init(self) -> None:
        # 2.12 splits the list with the separator when fixed_members_value is set; its fields (the separator) are
        # set before its setter methods (the list), so the configured separator applies whatever the XML order
        sep = self.fixed_members_seperator or ","
        raw = self.fixed_members_value
        self.members = None if raw is None else \
            [m.replace("/", ":") for m in re.split("[" + re.escape(sep) + "]", raw) if m]

    def body(self) -> Any:
        return FIXED_MEMBERSHIP_BODY

    def authenticate(self, token: tuple | None, src: Any, auth: Any) -> bool:
        if token is None or token[0] != self.NAME or self.members is None:
            return False
        phys = auth.physical_address(src)
        if phys is None:
            auth.rl.warning("no-physical", "%s: no physical address for %s", auth.local_addr, src)
            return False
        with_port = java_ip_string(phys)
        without_port = with_port[:with_port.index(":")]   # as 2.12: up to the first colon (IPv6: the first group)
        return any(m == (with_port if ":" in m else without_port) for m in self.members)


class RegexMembership(AuthToken):
    NAME = "org.jgroups.auth.RegexMembership"
    PROPERTIES = {"match_string": str, "match_ip_address": to_bool, "match_logical_name": to_bool}
    match_ip_address = True
    match_logical_name = False
    match_string: str | None

    def init(self) -> None:
        if not self.match_ip_address and not self.match_logical_name:
            raise ConfigError("AUTH: either match_ip_address or match_logical_address has to be true")
        if self.match_string is None:
            raise ConfigError("AUTH: match_string cannot be null")
        try:
            self.pattern = re.compile(self.match_string)
        except re.error as e:
            raise ConfigError(f"AUTH: match_string {self.match_string!r}: {e}") from None

    def authenticate(self, token: tuple | None, src: Any, auth: Any) -> bool:
        """As 2.12: the token itself does not matter (any AuthHeader will do)."""
        if src is None:
            return False
        if self.match_ip_address:
            phys = auth.physical_address(src)
            if phys is not None and self.pattern.fullmatch(java_ip_string(phys)):
                return True
        if self.match_logical_name:
            name = auth.logical_name(src)
            if name is not None and self.pattern.fullmatch(name):
                return True
        return False


class X509Token(AuthToken):
    """``auth_value`` encrypted with the public key of the certificate ``cert_alias`` (RSA, PKCS#1 v1.5 padding:
    Java's ``Cipher.getInstance("RSA")``); the coordinator decrypts a joiner's with the private key of the same
    alias and compares. Every member needs the key pair (the same keystore)."""

    NAME = "org.jgroups.auth.X509Token"
    PROPERTIES = {"auth_value": str, "keystore_type": str, "keystore_path": str, "keystore_password": str,
                  "cert_alias": str, "cert_password": str, "cipher_type": str}
    keystore_type = "JKS"
    cipher_type = "RSA"
    auth_value: str | None
    keystore_path: str | None
    keystore_password: str | None
    cert_alias: str | None
    cert_password: str | None

    def init(self) -> None:
        for key in ("auth_value", "keystore_path", "keystore_password", "cert_alias"):
            if getattr(self, key) is None:
                raise ConfigError(f"AUTH: {self.NAME} needs {key}")
        if self.cipher_type.upper() not in ("RSA", "RSA/ECB/PKCS1PADDING"):
            raise ConfigError(f"AUTH: {self.NAME}: cipher_type {self.cipher_type!r} is not supported by jgpy "
                              "(RSA only: the certificate's key)")
        from jgpy.protocols.keystores import load_key_pair
        self._private_key, public_key = load_key_pair(self.keystore_path, self.keystore_type, self.keystore_password,
                                                      self.cert_alias, self.cert_password or self.keystore_password)
        from cryptography.hazmat.primitives.asymmetric import padding
        self._padding = padding.PKCS1v15()
        self.encrypted = public_key.encrypt(self.auth_value.encode("utf-8"), self._padding)

    def body(self) -> Any:
        return self.encrypted

    def authenticate(self, token: tuple | None, src: Any, auth: Any) -> bool:
        if token is None or token[0] != self.NAME or not isinstance(token[1], bytes):
            return False
        try:
            clear = self._private_key.decrypt(token[1], self._padding)
        except ValueError:
            auth.rl.warning("x509-decrypt", "%s: an X509Token of %s does not decrypt", auth.local_addr, src)
            return False
        return java_equals_ignore_case(clear.decode("utf-8", "replace"), self.auth_value)


TOKENS: dict[str, type[AuthToken]] = {t.NAME: t for t in (SimpleToken, MD5Token, FixedMembershipToken,
                                                           RegexMembership, X509Token)}

#: every property name of every token (AUTH accepts them; the chosen token must own the ones given)
TOKEN_PROPERTIES = sorted({k for t in TOKENS.values() for k in t.PROPERTIES})


def create_token(class_name: str, props: dict[str, str]) -> AuthToken:
    """The token ``auth_class`` names, configured with ``props`` (only its own 2.12 properties)."""
    cls = TOKENS.get(class_name)
    if cls is None:
        raise ConfigError(f"AUTH: auth_class {class_name!r} is not a 2.12 token jgpy knows ({', '.join(TOKENS)})")
    foreign = sorted(set(props) - set(cls.PROPERTIES))
    if foreign:
        raise ConfigError(f"AUTH: {', '.join(foreign)} {'is not a property' if len(foreign) == 1 else 'are not properties'}"
                          f" of {class_name} (JGroups 2.12 rejects unknown properties too); its properties: "
                          f"{', '.join(cls.PROPERTIES)}")
    token = cls(props)
    token.init()
    return token

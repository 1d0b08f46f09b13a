"""ENCRYPT's cryptography, as JGroups 2.12 and the JDK do it (``cryptography`` underneath; pyjks for keystores).

* Symmetric ciphers from a JCE transformation: ``"AES"`` is the JDK's default ``AES/ECB/PKCS5Padding``,
  ``"Blowfish"`` ``Blowfish/ECB/PKCS5Padding``; 2.12's ENCRYPT initialises its ciphers without an IV, so ECB is
  the only mode that works between members (a CBC cipher would pick a random IV nobody else knows).
* The key version: ``new String(MD5(key), "UTF-8")`` as the JDK decodes it (invalid sequences replaced as
  ``java.lang.String`` does, not as Python's decoder does: a UTF-8-encoded surrogate is one U+FFFD in Java).
* RSA key exchange: ``RSA/ECB/PKCS1Padding``, public keys as X.509 ``SubjectPublicKeyInfo`` DER
  (``PublicKey.getEncoded()``).
* A secret key from a JCEKS keystore (``keytool -genseckey -storetype JCEKS``).
"""

from __future__ import annotations

import hashlib
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import padding as asym_padding
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

#: jgpy generates no RSA key below this size (``cryptography`` refuses to; 512-bit RSA, 2.12's default, is
#: factored in hours). Peers' smaller keys are still used to encrypt the group key for them (a Java member's).
MIN_OWN_RSA_BITS = 1024
#: the largest peer public key jgpy encrypts for (bounds the work a KEY_REQUEST can ask for)
MAX_PEER_RSA_BITS = 8192

REPL = "\ufffd"


def java_utf8_string(data: bytes) -> str:
    """``new String(data, "UTF-8")`` as JDK 8+ decodes it (``String.decodeUTF8``): malformed input becomes
    U+FFFD with the JDK's run lengths; supplementary characters come out as one Python character (a surrogate
    pair in Java, which ``writeUTF`` writes as two 3-byte sequences, as the wire Writer does)."""
    out: list[str] = []
    n = len(data)
    i = 0

    def cont(b: int) -> bool:
        return (b & 0xC0) == 0x80

    while i < n:
        b1 = data[i]
        i += 1
        if b1 < 0x80:
            out.append(chr(b1))
        elif (b1 >> 5) == 0b110 and (b1 & 0x1E) != 0:           # 2 bytes, not overlong
            if i < n and cont(data[i]):
                out.append(chr(((b1 & 0x1F) << 6) | (data[i] & 0x3F)))
                i += 1
            else:
                out.append(REPL)
        elif (b1 >> 4) == 0b1110:                                # 3 bytes
            if i + 1 < n:
                b2, b3 = data[i], data[i + 1]
                if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not cont(b2) or not cont(b3):
                    out.append(REPL)                             # malformed3: 1 byte, or 2 with a good b2
                    i += 0 if (b1 == 0xE0 and (b2 & 0xE0) == 0x80) or not cont(b2) else 1
                else:
                    c = ((b1 & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F)
                    out.append(REPL if 0xD800 <= c <= 0xDFFF else chr(c))
                    i += 2
                continue
            if i < n and ((b1 == 0xE0 and (data[i] & 0xE0) == 0x80) or not cont(data[i])):
                out.append(REPL)                                 # malformed3_2: the lead alone
                continue
            out.append(REPL)                                     # a truncated sequence at the end: one REPL
            break
        elif (b1 >> 3) == 0b11110:                               # 4 bytes
            if i + 2 < n:
                b2, b3, b4 = data[i], data[i + 1], data[i + 2]
                uc = ((b1 & 0x07) << 18) | ((b2 & 0x3F) << 12) | ((b3 & 0x3F) << 6) | (b4 & 0x3F)
                if not (cont(b2) and cont(b3) and cont(b4)) or not 0x10000 <= uc <= 0x10FFFF:
                    out.append(REPL)
                    i += _malformed4(b1, b2, b3)
                else:
                    out.append(chr(uc))
                    i += 3
                continue
            if b1 > 0xF4 or (i < n and _malformed4_2(b1, data[i])):
                out.append(REPL)                                 # the lead alone
                continue
            i += 1
            out.append(REPL)
            if i < n and not cont(data[i]):
                continue
            break
        else:
            out.append(REPL)
    return "".join(out)


def _malformed4_2(b1: int, b2: int) -> bool:
    return ((b1 == 0xF0 and (b2 < 0x90 or b2 > 0xBF)) or (b1 == 0xF4 and (b2 & 0xF0) != 0x80)
            or (b2 & 0xC0) != 0x80)


def _malformed4(b1: int, b2: int, b3: int) -> int:
    """How many bytes after the lead one U+FFFD of a malformed 4-byte sequence takes (the JDK's malformed4)."""
    if b1 > 0xF4 or _malformed4_2(b1, b2):
        return 0
    if (b3 & 0xC0) != 0x80:
        return 1
    return 2


def key_version(key: bytes) -> str:
    """2.12's version of a secret key: its MD5 digest as a Java string (see :func:`java_utf8_string`)."""
    return java_utf8_string(hashlib.md5(key).digest())     # noqa: S324 - 2.12's wire value, not a security use


# ---- symmetric ciphers ----------------------------------------------------------------------------------

def _aes(key: bytes):
    return algorithms.AES(key)


def _blowfish(key: bytes):
    from cryptography.hazmat.decrepit.ciphers.algorithms import Blowfish
    return Blowfish(key)


def _desede(key: bytes):
    from cryptography.hazmat.decrepit.ciphers.algorithms import TripleDES
    return TripleDES(key)


#: JCE algorithm name -> (cipher factory, block size in bits, key sizes in bytes Java accepts)
SYM_ALGORITHMS = {
    "AES": (_aes, 128, (16, 24, 32)),
    "BLOWFISH": (_blowfish, 64, tuple(range(4, 57))),
    "DESEDE": (_desede, 64, (16, 24)),
}


def algorithm_name(transformation: str) -> str:
    """The algorithm of a JCE transformation (``"AES/ECB/PKCS5Padding"`` -> ``"AES"``), as 2.12's getAlgorithm."""
    return transformation.split("/", 1)[0]


class SymmetricCipher:
    """A JCE ``algorithm[/ECB[/PKCS5Padding|NoPadding]]`` cipher with one secret key; thread-safe. ``version`` is
    2.12's key version of ``key``.

    ECB keeps no state between blocks, so one encryptor and one decryptor context serve every message (each
    call hands them whole blocks, padded here: PKCS5 is PKCS7 on 8- or 16-byte blocks): a quarter of the cost of
    a context per message."""

    def __init__(self, transformation: str, key: bytes) -> None:
        parts = transformation.split("/")
        name = parts[0].upper()
        if name not in SYM_ALGORITHMS:
            raise ValueError(f"sym_algorithm {transformation!r}: jgpy supports {', '.join(SYM_ALGORITHMS)}")
        mode = parts[1].upper() if len(parts) > 1 else "ECB"
        pad = parts[2].upper() if len(parts) > 2 else "PKCS5PADDING"
        if mode != "ECB" or pad not in ("PKCS5PADDING", "NOPADDING") or len(parts) > 3:
            raise ValueError(f"sym_algorithm {transformation!r}: 2.12's ENCRYPT works with ECB only (it gives its "
                             f"ciphers no IV) and PKCS5Padding or NoPadding")
        factory, block_bits, sizes = SYM_ALGORITHMS[name]
        if len(key) not in sizes:
            raise ValueError(f"a {len(key)}-byte key does not fit {name}")
        self.transformation = transformation
        self.key = bytes(key)
        self.block = block_bits // 8
        self.padded = pad == "PKCS5PADDING"
        cipher = Cipher(factory(self.key), modes.ECB())     # noqa: S305 - 2.12's wire format
        self._enc = cipher.encryptor()
        self._dec = cipher.decryptor()
        self._enc_lock = threading.Lock()
        self._dec_lock = threading.Lock()
        self.version = key_version(self.key)

    def encrypt(self, data) -> bytes:
        if self.padded:
            k = self.block - len(data) % self.block
            data = bytes(data) + _PADS[k]
        elif len(data) % self.block:
            raise ValueError("NoPadding: the plain text is not a whole number of blocks")
        with self._enc_lock:
            return self._enc.update(data)

    def decrypt(self, data) -> bytes:
        """The plain text; ValueError for a length that is not whole blocks or bad padding."""
        n = len(data)
        if n % self.block or (self.padded and n == 0):
            raise ValueError("the cipher text is not a whole number of blocks")
        with self._dec_lock:
            plain = self._dec.update(data)
        if not self.padded:
            return plain
        k = plain[-1]
        if not 0 < k <= self.block or plain[-k:] != _PADS[k]:
            raise ValueError("bad padding")
        return plain[:-k]


#: PKCS5/PKCS7 padding by its length
_PADS = [bytes([k]) * k for k in range(33)]


def generate_key(transformation: str, bits: int) -> bytes:
    """A fresh secret key of ``bits`` (2.12's ``KeyGenerator.init(sym_init)``)."""
    if bits <= 0 or bits % 8:
        raise ValueError(f"sym_init={bits}: a key size in whole bytes")
    return os.urandom(bits // 8)


# ---- RSA key exchange -------------------------------------------------------------------------------------

class RsaKeyPair:
    """Our key pair for the key exchange: the public key goes out in KEY_REQUEST (X.509 DER), the private key
    opens the SECRETKEY answer (RSA/ECB/PKCS1Padding)."""

    def __init__(self, bits: int) -> None:
        self.bits = max(bits, MIN_OWN_RSA_BITS)
        self._private = rsa.generate_private_key(public_exponent=65537, key_size=self.bits)
        self.public_der = self._private.public_key().public_bytes(serialization.Encoding.DER,
                                                                  serialization.PublicFormat.SubjectPublicKeyInfo)

    def decrypt(self, data: bytes) -> bytes:
        return self._private.decrypt(bytes(data), asym_padding.PKCS1v15())


def encrypt_for(public_der: bytes, data: bytes) -> bytes:
    """``data`` encrypted with a peer's X.509-encoded RSA public key; ValueError for anything that is not an RSA
    key of at most :data:`MAX_PEER_RSA_BITS`."""
    key = serialization.load_der_public_key(bytes(public_der))
    if not isinstance(key, rsa.RSAPublicKey):
        raise ValueError("not an RSA public key")
    if key.key_size > MAX_PEER_RSA_BITS:
        raise ValueError(f"a {key.key_size}-bit RSA key")
    return key.encrypt(bytes(data), asym_padding.PKCS1v15())


# ---- keystores ------------------------------------------------------------------------------------------------

@dataclass(frozen=True)
class StoredKey:
    key: bytes
    algorithm: str        # the key's algorithm as the keystore records it ("Blowfish", "AES")


def find_keystore(name: str) -> Path:
    """2.12 loads ``key_store_name`` from the classpath; jgpy looks for it as a path (absolute, or relative to
    the current directory), then in each directory of the ``CLASSPATH`` environment variable."""
    p = Path(name)
    if p.is_file():
        return p
    if not p.is_absolute():
        for d in os.environ.get("CLASSPATH", "").split(os.pathsep):
            if d and (Path(d) / name).is_file():
                return Path(d) / name
    raise FileNotFoundError(f"Unable to load keystore {name}: not a file, nor in a directory of CLASSPATH")


def load_keystore_key(name: str, store_password: str, key_password: str, alias: str) -> StoredKey:
    """The secret key ``alias`` of the JCEKS keystore ``name`` (aliases are case-insensitive, as Java's)."""
    import jks
    path = find_keystore(name)
    store = jks.KeyStore.load(str(path), store_password, try_decrypt_keys=False)
    if store.store_type != "jceks":
        raise ValueError(f"{path}: a {store.store_type} keystore; ENCRYPT needs JCEKS (secret keys)")
    entry = store.secret_keys.get(alias.lower()) or store.secret_keys.get(alias)
    if entry is None:
        raise KeyError(f"Unable to retrieve key '{alias}' from keystore {name}")
    if not entry.is_decrypted():
        entry.decrypt(key_password)
    return StoredKey(bytes(entry.key), entry.algorithm)

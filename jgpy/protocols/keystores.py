"""Java keystores for AUTH's X509Token: an alias's private key and its certificate's public key.

``JKS`` and ``JCEKS`` stores are read with pyjks, ``PKCS12`` with ``cryptography`` (both in the ``security``
extra). The keys are ``cryptography`` objects.
"""

from __future__ import annotations

from typing import Any

from jgpy.errors import ConfigError


def load_key_pair(path: str, store_type: str, store_password: str, alias: str, key_password: str) -> tuple[Any, Any]:
    """``(private key, public key of the certificate)`` of ``alias`` in the keystore at ``path``."""
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
    except ImportError as e:               # pragma: no cover - the 'security' extra is not installed
        raise ConfigError(f"AUTH's X509Token needs the 'cryptography' package (pip install jgpy[security]): {e}") \
            from None
    kind = (store_type or "JKS").upper()
    try:
        if kind == "PKCS12":
            from cryptography.hazmat.primitives.serialization import pkcs12
            with open(path, "rb") as f:
                key, cert, _ = pkcs12.load_key_and_certificates(f.read(), store_password.encode("utf-8"))
            if key is None or cert is None:
                raise ConfigError(f"keystore {path}: no private key with a certificate")
            return key, cert.public_key()
        if kind not in ("JKS", "JCEKS"):
            raise ConfigError(f"keystore type {store_type!r} is not supported (JKS, JCEKS, PKCS12)")
        try:
            import jks
        except ImportError as e:           # pragma: no cover
            raise ConfigError(f"AUTH's X509Token needs the 'pyjks' package (pip install jgpy[security]): {e}") \
                from None
        store = jks.KeyStore.load(path, store_password, try_decrypt_keys=False)
        entry = store.private_keys.get(alias.lower()) or store.private_keys.get(alias)
        if entry is None:
            raise ConfigError(f"keystore {path}: no private key entry {alias!r} "
                              f"(entries: {', '.join(sorted(store.entries)) or 'none'})")
        if not entry.is_decrypted():
            entry.decrypt(key_password)
        key = serialization.load_der_private_key(entry.pkey_pkcs8, None)
        cert = x509.load_der_x509_certificate(entry.cert_chain[0][1])
        return key, cert.public_key()
    except ConfigError as e:
        raise ConfigError(f"AUTH: {e}") from None
    except (OSError, ValueError) as e:
        raise ConfigError(f"AUTH: keystore {path} ({kind}), alias {alias!r}: {e}") from None
    except Exception as e:  # noqa: BLE001 - pyjks raises its own types (bad password, bad format)
        raise ConfigError(f"AUTH: keystore {path} ({kind}), alias {alias!r}: {type(e).__name__}: {e}") from None

"""ENCRYPT: encrypted group communication (``org.jgroups.protocols.ENCRYPT``, JGroups 2.12.2).

Every message with a payload going down gets its payload encrypted with the group's secret key (a symmetric
cipher, ``sym_algorithm``: "AES" = AES/ECB/PKCS5Padding by default) and an ``EncryptHeader(ENCRYPT, version)``,
``version`` naming the key (its MD5 as a Java string); a receiver decrypts with the key of that version, and
drops a message with a payload but no ENCRYPT header. With ``encrypt_entire_message`` the payload is instead the
encrypted ``Message.writeTo`` of the whole message (its headers above ENCRYPT included, which the receiver takes
from the decrypted copy); messages without a payload pass in clear unless ``encrypt_entire_message`` is set.

Two ways to get the key, as 2.12:

* **keystore** (``key_store_name``): every member reads the same secret key from a JCEKS keystore (``alias``,
  ``store_password``, ``key_password``); ``sym_algorithm`` left at "AES" becomes the key's own algorithm.
* **key exchange** (no keystore): each member generates a secret key and an RSA key pair (``asym_algorithm``,
  ``asym_init``) at init. The coordinator of the view is the key server and uses its key; a member that sees a
  new coordinator queues what it sends and receives, sends the coordinator a KEY_REQUEST carrying its X.509
  public key, and the coordinator answers a SECRETKEY: its key encrypted with that public key, with the key's
  version. The member installs it (its previous keys stay usable for messages still in flight) and sends and
  delivers what it queued. A view with the same coordinator changes nothing; a member that took the key from
  the old coordinator hands out that key when it becomes coordinator itself, as in 2.12.

Where jgpy deviates (each closes a hole; nothing changes on the wire):

* the queues of messages held while a member waits for a key are bounded (``max_queued_msgs``,
  ``max_queued_bytes``; 2.12's grow without limit): beyond them a message is dropped and counted;
* a KEY_REQUEST is answered only for a member of the current view or of the view the coordinator is about to
  install (2.12 hands the group key to anyone who asks); a SECRETKEY is taken only from the member we asked,
  while we wait for it (2.12 installs a key from anyone, any time); a member that still waits re-sends its
  KEY_REQUEST every ``key_request_interval`` ms (2.12 asks once: a lost request or answer stalls it for good);
* jgpy generates no RSA key pair below 1024 bits (``encrypt_keys.MIN_OWN_RSA_BITS``); a Java member's 512-bit
  key still gets the group key;
* a member that gets the key sends what it held before anything sent meanwhile (2.12's drain races the sending
  thread: a Java member's first messages can reach NAKACK, and so every receiver, out of order);
* a previous key stays usable for ``max_previous_keys`` later keys (2.12 keeps them in a WeakHashMap keyed by
  fresh strings: gone at its next garbage collection).

What this does not protect (see docs/SECURITY.md, "ENCRYPT"): headers travel in clear (with
``encrypt_entire_message`` too: the outer copy keeps them, only those above ENCRYPT are taken from the
encrypted copy), ECB leaks equal plain-text blocks, nothing authenticates a message (no MAC: a flipped
cipher-text bit is undetected unless the padding breaks), nothing stops a replay but the reliable layers'
sequence numbers, and the key exchange trusts whoever is coordinator.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

from jgpy._core.headers import EncryptHeader
from jgpy._core.message import Message
from jgpy._core.wire import Reader, Writer
from jgpy.protocols.encrypt_keys import (RsaKeyPair, SymmetricCipher, algorithm_name, encrypt_for, generate_key,
                                         load_keystore_key)
from jgpy.protocols.guard import MessageGuard, retained_bytes
from jgpy.stack.events import EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, ignored, to_bool, to_int, to_size, to_str
from jgpy.stack.protocol import Protocol

ENCRYPT_T, KEY_REQUEST, SECRETKEY = EncryptHeader.ENCRYPT, EncryptHeader.KEY_REQUEST, EncryptHeader.SECRETKEY

#: jgpy's drop counters (dump_stats)
DROP_COUNTERS = ("dropped_no_header", "dropped_unknown_version", "dropped_undecryptable", "dropped_up_queue_full",
                 "dropped_down_queue_full", "dropped_control_in_keystore_mode", "dropped_unknown_type",
                 "key_requests_refused", "key_requests_malformed", "secretkeys_refused", "secretkeys_malformed")


class ENCRYPT(Protocol):
    NAME = "ENCRYPT"
    IGNORED_PROPERTIES = {
        **Protocol.IGNORED_PROPERTIES,
        "asym_provider": ignored("a JCE provider name; jgpy's cryptography is the `cryptography` package"),
        "asymProvider": ignored("asym_provider's field name: a JCE provider name, ignored as asym_provider"),
        "sym_provider": ignored("a JCE provider name; jgpy's cryptography is the `cryptography` package"),
        "symProvider": ignored("sym_provider's field name: a JCE provider name, ignored as sym_provider"),
    }

    asym_algorithm = Property(to_str, "RSA", "Cipher engine transformation for asymmetric algorithm. Default is RSA "
                              "(jgpy: RSA with PKCS1 padding only)", aliases=("asymAlgorithm",))
    sym_algorithm = Property(to_str, "AES", "Cipher engine transformation for symmetric algorithm. Default is AES "
                             "(jgpy: AES, Blowfish or DESede, ECB, PKCS5Padding or NoPadding)",
                             aliases=("symAlgorithm",))
    asym_init = Property(to_int, 512, "Initial public/private key length. Default is 512 (jgpy generates at least "
                         "1024 bits)", aliases=("asymInit",))
    sym_init = Property(to_int, 128, "Initial key length for matching symmetric algorithm. Default is 128",
                        aliases=("symInit",))
    key_store_name = Property(to_str, None, "File on classpath that contains keystore repository (jgpy: a path, or "
                              "a name found in a directory of the CLASSPATH environment variable)",
                              aliases=("keyStoreName",))
    store_password = Property(to_str, "changeit", "Password used to check the integrity/unlock the keystore. "
                              "Change the default", aliases=("storePassword",))
    key_password = Property(to_str, "changeit", "Password for recovering the key. Change the default",
                            aliases=("keyPassword",))
    alias = Property(to_str, "mykey", "Alias used for recovering the key. Change the default")
    encrypt_entire_message = Property(to_bool, False, "encrypt the entire message (Message.writeTo) instead of "
                                      "only its payload")
    max_queued_msgs = Property(to_int, 10000, "jgpy: messages held per direction while waiting for a key; "
                               "beyond it a message is dropped and counted")
    max_queued_bytes = Property(to_size, 20_000_000, "jgpy: bytes held per direction while waiting for a key")
    key_request_interval = Property(to_int, 2000, "jgpy: ms between KEY_REQUESTs while waiting for the key server's "
                                    "answer (0: ask once, as 2.12)")
    max_previous_keys = Property(to_int, 8, "jgpy: how many earlier keys still decrypt messages sent before a "
                                 "key change")

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "an ENCRYPT message", self._rl)
        self.cipher: SymmetricCipher | None = None        # the key we encrypt with
        self._previous: dict[str, SymmetricCipher] = {}  # version -> an earlier key (insertion order: oldest first)
        self._keypair: RsaKeyPair | None = None
        self.supplied_key = False
        self.key_server = None
        self.is_key_server = False
        self._allowed: frozenset = frozenset()            # who may ask us for the key: view + next view members
        self._queue_up = True
        self._queue_down = False
        self._up_q: deque = deque()
        self._up_bytes = 0
        self._down_q: deque = deque()
        self._down_bytes = 0
        self._draining_up = False
        self._draining_down = False
        # hints read without the lock on the hot paths: is anything held or waiting (then the lock decides)
        self._hold_up = True
        self._hold_down = False
        self._request_task = None
        self.counters = dict.fromkeys(DROP_COUNTERS + (
            "encrypted", "decrypted", "key_requests_sent", "key_requests_answered", "keys_installed",
            "queued_up", "queued_down", "version_mismatches"), 0)

    # ---- life cycle ----

    def init(self) -> None:
        if self.key_store_name:
            stored = load_keystore_key(self.key_store_name, self.store_password, self.key_password or
                                       self.store_password, self.alias)
            if self.sym_algorithm == "AES":            # 2.12: the default gives way to the key's own algorithm
                self.sym_algorithm = stored.algorithm
            self.cipher = SymmetricCipher(self.sym_algorithm, stored.key)
            self.supplied_key = True
            self._queue_up = self._queue_down = False
            self._sync_holds()
        else:
            if algorithm_name(self.asym_algorithm).upper() != "RSA" or self.asym_algorithm.upper() not in (
                    "RSA", "RSA/ECB/PKCS1PADDING"):
                raise ValueError(f"asym_algorithm {self.asym_algorithm!r}: jgpy supports RSA (RSA/ECB/PKCS1Padding)")
            self.cipher = SymmetricCipher(self.sym_algorithm, generate_key(self.sym_algorithm, self.sym_init))
            self._keypair = RsaKeyPair(self.asym_init)

    def start(self) -> None:
        with self._lock:
            self.key_server = None
            self.is_key_server = False
            self._queue_up = not self.supplied_key
            self._queue_down = False
            self._sync_holds()

    def stop(self) -> None:
        self._cancel_requests()
        with self._lock:
            self._up_q.clear()
            self._down_q.clear()
            self._up_bytes = self._down_bytes = 0
            self._sync_holds()

    @property
    def version(self) -> str | None:
        c = self.cipher
        return c.version if c is not None else None

    # ---- views: who is the key server ----

    def up(self, evt) -> Any:
        self._handle_event(evt)
        return self.up_prot.up(evt)

    def down(self, evt) -> Any:
        self._handle_event(evt)
        return self.down_prot.down(evt)

    def _handle_event(self, evt) -> None:
        t = evt.type
        if t not in (EventType.VIEW_CHANGE, EventType.TMP_VIEW):
            return
        members = list(evt.arg.members or ())
        with self._lock:
            self._allowed = frozenset(members) | (self._allowed if t == EventType.TMP_VIEW else frozenset())
        if not self.supplied_key:
            self._view_change(members, t == EventType.TMP_VIEW)

    def _view_change(self, members: list, make_server: bool) -> None:
        """2.12's handleViewChange: the view's first member is the key server."""
        me = self.local_addr
        new_server = members[0] if members else me
        ask = False
        with self._lock:
            if make_server or not members or (new_server == me and new_server != self.key_server):
                self.key_server, self.is_key_server = new_server, True
                self._queue_up = self._queue_down = False
                self._sync_holds()
                drain = True
            elif new_server != self.key_server:
                self.key_server, self.is_key_server = new_server, False
                self._queue_up = self._queue_down = True
                self._sync_holds()
                ask = True
                drain = False
            else:
                drain = False
        if drain:
            self._cancel_requests()
            self._drain_down()
            self._drain_up()
        if ask:
            self._send_key_request()
            self._schedule_requests()

    # ---- down ----

    def down_msg(self, msg) -> Any:
        if self._hold_down:
            with self._lock:
                if self._queue_down or self._draining_down:
                    self._enqueue(self._down_q, msg, down=True)
                    return None
        return self._send(msg)

    def _sync_holds(self) -> None:
        """Update the lock-free hints (call with the lock held, after changing the queue state)."""
        self._hold_up = self._queue_up or self._draining_up or bool(self._up_q)
        self._hold_down = self._queue_down or self._draining_down

    def _send(self, msg) -> Any:
        """2.12's sendDown: encrypt the payload, or the whole message, under our current key."""
        eem = self.encrypt_entire_message
        if msg.length == 0 and not eem:
            return self.down_prot.down_msg(msg)
        cipher = self.cipher
        hdr = EncryptHeader(ENCRYPT_T, cipher.version, eem)
        if eem:
            w = Writer()
            self.stack.dialect.write_message_to(w, msg)
            out = msg.copy(False)          # the headers already present travel in clear too, as in 2.12
            out.set_buffer(cipher.encrypt(w.getvalue()))
            if out.src is None:
                out.src = self.local_addr
        else:
            out = msg.copy(False)          # a copy: the original may be retransmitted (never encrypted twice)
            out.set_buffer(cipher.encrypt(msg.payload))
        out.put_header(self.id, hdr)
        self.counters["encrypted"] += 1
        return self.down_prot.down_msg(out)

    def _drain_down(self) -> None:
        """Send what was queued, in order; senders meanwhile queue behind it."""
        with self._lock:
            if self._draining_down:
                return
            self._draining_down = True
            self._sync_holds()
        try:
            while True:
                with self._lock:
                    if not self._down_q or self._queue_down:
                        self._draining_down = False
                        self._sync_holds()
                        return
                    msg = self._down_q.popleft()
                    self._down_bytes -= retained_bytes([msg])
                try:
                    self._send(msg)
                except Exception:  # noqa: BLE001 - one message's failure must not strand the others
                    self._rl.exception("drain-down", "%s: failed sending a queued message", self.local_addr)
        except BaseException:
            with self._lock:
                self._draining_down = False
                self._sync_holds()
            raise

    # ---- up ----

    def up_batch(self, msgs: list) -> None:
        ready: list = []
        eem = self.encrypt_entire_message
        pid = self.id
        for msg in msgs:
            if msg.length == 0 and not eem:
                ready.append(msg)
                continue
            hdr = msg.get_header(pid)
            if hdr is None:
                self.counters["dropped_no_header"] += 1
                self._rl.warning("no-header", "%s: dropped a message with a payload but no ENCRYPT header from %s",
                                 self.local_addr, msg.src)
            elif hdr.type == ENCRYPT_T:
                if not hdr.encrypt_entire_msg and msg.length == 0:
                    ready.append(msg)
                elif not (self._hold_up and self._held(msg)):
                    m = self._decrypt(msg, hdr)
                    if m is not None:
                        ready.append(m)
            else:
                if ready:
                    self.up_prot.up_batch(ready)
                    ready = []
                try:
                    self._control(msg, hdr)
                except Exception:  # noqa: BLE001 - a hostile control message is dropped alone
                    self._guard.failure(msg)
        if ready:
            self.up_prot.up_batch(ready)

    def _held(self, msg) -> bool:
        """Queue ``msg`` if we wait for a key or hold earlier messages (they go first); True if queued."""
        with self._lock:
            if self._queue_up or self._draining_up or self._up_q:
                self._enqueue(self._up_q, msg, down=False)
                self._sync_holds()
                return True
        return False

    def _pass_up(self, msgs: list) -> None:
        """Decrypt held ENCRYPT messages and pass them up, in order."""
        pid = self.id
        ready = [m for m in (self._decrypt(msg, msg.get_header(pid)) for msg in msgs) if m is not None]
        if ready:
            self.up_prot.up_batch(ready)

    def _decrypt(self, msg, hdr):
        cipher = self.cipher
        if cipher is None or hdr.version != cipher.version:
            cipher = self._previous.get(hdr.version)
            if cipher is None:
                self.counters["dropped_unknown_version"] += 1
                self._rl.warning("unknown-version", "%s: dropped a message from %s encrypted with a key we do "
                                 "not have", self.local_addr, msg.src)
                return None
        try:
            plain = cipher.decrypt(msg.payload)
            if not hdr.encrypt_entire_msg:
                out = msg.copy(False)
                out.set_buffer(plain)
            else:
                out = self.stack.dialect.read_message_from(Reader(plain))
                if out.dest is None:
                    out.dest = msg.dest
                if out.src is None:
                    out.src = msg.src
        except Exception:  # noqa: BLE001 - wrong key, tampered or truncated cipher text
            self.counters["dropped_undecryptable"] += 1
            self._rl.warning("undecryptable", "%s: dropped a message from %s that does not decrypt (wrong key, "
                             "tampered or truncated)", self.local_addr, msg.src)
            return None
        self.counters["decrypted"] += 1
        return out

    def _drain_up(self) -> None:
        with self._lock:
            if self._draining_up:
                return
            self._draining_up = True
            self._sync_holds()
        try:
            while True:
                with self._lock:
                    if not self._up_q or self._queue_up:
                        self._draining_up = False
                        self._sync_holds()
                        return
                    batch = list(self._up_q)
                    self._up_q.clear()
                    self._up_bytes = 0
                    self._sync_holds()
                self._pass_up(batch)
        except BaseException:
            with self._lock:
                self._draining_up = False
                self._sync_holds()
            raise

    def _enqueue(self, q: deque, msg, down: bool) -> None:
        """Hold ``msg`` until there is a key (call with the lock held); drop it beyond the bounds."""
        size = retained_bytes([msg])
        held = self._down_bytes if down else self._up_bytes
        if len(q) >= self.max_queued_msgs or held + size > self.max_queued_bytes:
            self.counters["dropped_down_queue_full" if down else "dropped_up_queue_full"] += 1
            self._rl.warning("queue-full-down" if down else "queue-full-up", "%s: dropped a message: %d messages "
                             "held while waiting for the group key", self.local_addr, len(q))
            return
        q.append(msg)
        if down:
            self._down_bytes += size
            self.counters["queued_down"] += 1
        else:
            self._up_bytes += size
            self.counters["queued_up"] += 1

    # ---- key exchange ----

    def _control(self, msg, hdr) -> None:
        if self.supplied_key:
            self.counters["dropped_control_in_keystore_mode"] += 1
            self._rl.warning("control-keystore", "%s: received an ENCRYPT header of type %d while in configured "
                             "(keystore) mode", self.local_addr, hdr.type)
            return
        if hdr.type == KEY_REQUEST:
            self._answer_key_request(msg)
        elif hdr.type == SECRETKEY:
            self._install_secret_key(msg, hdr)
        else:
            self.counters["dropped_unknown_type"] += 1
            self._rl.warning("unknown-type", "%s: ignored an ENCRYPT header of type %d", self.local_addr, hdr.type)

    def _answer_key_request(self, msg) -> None:
        src = msg.src
        if src is None or src not in self._allowed:
            self.counters["key_requests_refused"] += 1
            self._rl.warning("key-request-stranger", "%s: refused a KEY_REQUEST from %s, not a member",
                             self.local_addr, src)
            return
        cipher = self.cipher
        try:
            encrypted = encrypt_for(msg.payload, cipher.key)
        except Exception:  # noqa: BLE001 - not an RSA public key we will use
            self.counters["key_requests_malformed"] += 1
            self._rl.warning("key-request-malformed", "%s: unable to reconstitute the public key of %s",
                             self.local_addr, src)
            return
        out = Message(src, encrypted)
        out.put_header(self.id, EncryptHeader(SECRETKEY, cipher.version))
        self.counters["key_requests_answered"] += 1
        self.down_prot.down_msg(out)

    def _install_secret_key(self, msg, hdr) -> None:
        with self._lock:
            expected = self._queue_up and not self.is_key_server and msg.src == self.key_server
        if not expected:
            self.counters["secretkeys_refused"] += 1
            self._rl.warning("secretkey-unexpected", "%s: ignored a SECRETKEY from %s (key server: %s)",
                             self.local_addr, msg.src, self.key_server)
            return
        try:
            # OpenSSL >= 3.2 rejects bad PKCS#1 padding implicitly (a pseudo-random plain text, no error, against
            # padding oracles): a forged SECRETKEY from the key server may then install a useless key, as a
            # well-encrypted forged one can in 2.12 (our public key went out in clear)
            key = self._keypair.decrypt(msg.payload)
            cipher = SymmetricCipher(self.sym_algorithm, key)
        except Exception:  # noqa: BLE001 - not encrypted for us, or not a key of our algorithm
            self.counters["secretkeys_malformed"] += 1
            self._rl.warning("secretkey-malformed", "%s: unable to decode the SECRETKEY from %s", self.local_addr,
                             msg.src)
            return
        if hdr.version is not None and hdr.version != cipher.version:
            # 2.12 names the key by the header's version: so do we, to stay in step with the key server
            self.counters["version_mismatches"] += 1
            cipher.version = hdr.version
        with self._lock:
            old = self.cipher
            if old is not None and old.version != cipher.version:
                self._previous.pop(old.version, None)
                self._previous[old.version] = old
                while len(self._previous) > max(0, self.max_previous_keys):
                    del self._previous[next(iter(self._previous))]
            self.cipher = cipher
            self._queue_up = self._queue_down = False
            self._sync_holds()
            self.counters["keys_installed"] += 1
        self._cancel_requests()
        self._drain_up()
        self._drain_down()

    def _send_key_request(self) -> None:
        with self._lock:
            server = self.key_server
            waiting = self._queue_up and not self.is_key_server
        if not waiting or server is None:
            return
        out = Message(server, self._keypair.public_der)
        out.put_header(self.id, EncryptHeader(KEY_REQUEST, self.version))
        self.counters["key_requests_sent"] += 1
        self.down_prot.down_msg(out)

    def _schedule_requests(self) -> None:
        self._cancel_requests()
        if self.key_request_interval > 0 and self.stack is not None:
            interval = self.key_request_interval
            self._request_task = self.timer.schedule_with_fixed_delay(interval, interval, self._resend_request,
                                                                      "ENCRYPT-key-request")

    def _resend_request(self) -> None:
        with self._lock:
            waiting = self._queue_up and not self.is_key_server
        if waiting:
            self._send_key_request()
        else:
            self._cancel_requests()

    def _cancel_requests(self) -> None:
        task, self._request_task = self._request_task, None
        if task is not None:
            task.cancel()

    # ---- stats ----

    def dump_stats(self) -> dict[str, Any]:
        with self._lock:
            return {**self.counters, "failed_msgs": self._guard.failed, "key_server": str(self.key_server),
                    "is_key_server": self.is_key_server, "waiting_for_key": self._queue_up,
                    "up_queue": len(self._up_q), "down_queue": len(self._down_q),
                    "previous_keys": len(self._previous), "supplied_key": self.supplied_key}

"""AUTH: a joiner must show a token before the coordinator lets it in (``org.jgroups.protocols.AUTH``, 2.12.2).

AUTH sits below pbcast.GMS. Down, it puts an ``AuthHeader`` with our token (``auth_class``, see
:mod:`jgpy.protocols.auth_tokens`) on every JOIN_REQ, JOIN_REQ_WITH_STATE_TRANSFER and MERGE_REQ we send. Up,
every such request is checked before GMS sees it: without an AuthHeader, or with a token our own token does not
accept, it is dropped and answered as 2.12 answers it: a JOIN_RSP whose ``fail_reason`` is ``"Authentication
failed"`` (``"Failed to find an AuthHeader in Message"`` without a header), or a MERGE_RSP with
``merge_rejected`` set. A refused joiner's ``connect()`` raises :class:`jgpy.protocols.pbcast.gms.AuthRejectedError`
(a Java joiner's throws a SecurityException with the reason).

Properties: ``auth_class`` and the properties of the token it names, with 2.12's names (``auth_value``,
``token_hash``, ``fixed_members_value``, ``match_string``, ``keystore_path`` ...); a property of another token is a
configuration error, as in 2.12.

Where jgpy deviates (nothing changes on the wire):

* 2.12 instantiates whatever class name a received AuthHeader names (``Class.forName(name).newInstance()``); jgpy
  knows the five 2.12 tokens and reads any other name as no token (what 2.12 does for a class it cannot find);
* refusals are answered at most ``max_rejections_per_sec`` times a second (the others are dropped unanswered and
  counted): a stranger's stream of requests with made-up senders cannot turn the coordinator into a sender of as
  many messages (each also a UNICAST connection), and its log lines are rate-limited.
"""

from __future__ import annotations

import time
from typing import Any

from jgpy._core.address import logical_name
from jgpy._core.headers import AuthHeader, GmsHeader
from jgpy._core.message import Message
from jgpy._core.types import JoinRsp
from jgpy.errors import ConfigError
from jgpy.protocols.auth_tokens import TOKEN_PROPERTIES, AuthToken, create_token
from jgpy.protocols.guard import MessageGuard
from jgpy.protocols.pbcast.gms import AUTH_REASONS
from jgpy.stack.events import Event, EventType
from jgpy.stack.logutil import RateLimitedLog
from jgpy.stack.properties import Property, to_int, to_str
from jgpy.stack.protocol import Protocol

H = GmsHeader
CHECKED = (H.JOIN_REQ, H.JOIN_REQ_WITH_STATE_TRANSFER, H.MERGE_REQ)
JOIN_REQS = (H.JOIN_REQ, H.JOIN_REQ_WITH_STATE_TRANSFER)

#: 2.12's reasons in a refused JoinRsp
REASON_FAILED, REASON_NO_HEADER = AUTH_REASONS[:2]

_TOKEN_DOC = "a property of the token auth_class names (JGroups 2.12's name; see jgpy.protocols.auth_tokens)"


class AUTH(Protocol):
    NAME = "AUTH"

    auth_class = Property(to_str, None, "the token's Java class: org.jgroups.auth.SimpleToken, MD5Token, "
                                        "FixedMembershipToken, RegexMembership or X509Token")
    auth_value = Property(to_str, None, _TOKEN_DOC)
    token_hash = Property(to_str, None, _TOKEN_DOC)
    fixed_members_value = Property(to_str, None, _TOKEN_DOC)
    fixed_members_seperator = Property(to_str, None, _TOKEN_DOC + " (2.12's spelling)")
    fixed_members_separator = Property(to_str, None, _TOKEN_DOC + " (2.12's setter)")
    match_string = Property(to_str, None, _TOKEN_DOC)
    match_ip_address = Property(to_str, None, _TOKEN_DOC)
    match_logical_name = Property(to_str, None, _TOKEN_DOC)
    keystore_type = Property(to_str, None, _TOKEN_DOC)
    keystore_path = Property(to_str, None, _TOKEN_DOC)
    keystore_password = Property(to_str, None, _TOKEN_DOC)
    cert_alias = Property(to_str, None, _TOKEN_DOC)
    cert_password = Property(to_str, None, _TOKEN_DOC)
    cipher_type = Property(to_str, None, _TOKEN_DOC)
    max_rejections_per_sec = Property(
        to_int, 20, "jgpy: refused JOIN_REQs / MERGE_REQs answered per second at most (the others are dropped "
        "without an answer; a refused joiner asks again after join_timeout)")

    def __init__(self) -> None:
        super().__init__()
        self.token: AuthToken | None = None
        self.gms_id = 0
        self.counters = dict.fromkeys(("accepted", "refused", "refused_no_header", "rejections_not_sent"), 0)
        self.rl = RateLimitedLog(self.log)
        self._guard = MessageGuard(self, "an AUTH-checked GMS request", self.rl)
        self._window = 0.0
        self._sent_in_window = 0

    def init(self) -> None:
        assert set(TOKEN_PROPERTIES) <= {p for p in vars(AUTH)}, "a token property AUTH does not declare"
        if self.auth_class is None:
            raise ConfigError("AUTH: auth_class is required (e.g. org.jgroups.auth.SimpleToken)")
        given = {k: getattr(self, k) for k in TOKEN_PROPERTIES if getattr(self, k) is not None}
        self.token = create_token(self.auth_class, given)
        gms = self.stack.find("pbcast.GMS") if self.stack is not None else None
        self.gms_id = gms.id if gms is not None else self.stack.dialect.protocol_id("pbcast.GMS")

    def dump_stats(self) -> dict[str, Any]:
        return {**self.counters, "failed_msgs": self._guard.failed}

    # ---- what tokens ask ----

    def physical_address(self, addr: Any) -> Any:
        return self.down_prot.down(Event(EventType.GET_PHYSICAL_ADDRESS, addr))

    @staticmethod
    def logical_name(addr: Any) -> str | None:
        return logical_name(addr)

    # ---- down ----

    def down_msg(self, msg: Message) -> Any:
        hdr = msg.get_header(self.gms_id)
        if hdr is not None and hdr.type in CHECKED:
            msg.put_header(self.id, AuthHeader((self.token.NAME, self.token.body())))
        return self.down_prot.down_msg(msg)

    # ---- up ----

    def up_batch(self, msgs: list) -> None:
        gms_id = self.gms_id
        refused = None
        for msg in msgs:
            try:
                hdr = msg.get_header(gms_id)
                if hdr is None or hdr.type not in CHECKED or self._accept(msg, hdr):
                    continue
            except Exception:  # noqa: BLE001 - a request we cannot check is not let through
                self._guard.failure(msg)
            if refused is None:
                refused = []
            refused.append(msg)
        if refused is not None:
            msgs = [m for m in msgs if not any(m is r for r in refused)]
        if msgs:
            self.up_prot.up_batch(msgs)

    def _accept(self, msg: Message, hdr: GmsHeader) -> bool:
        auth_hdr = msg.get_header(self.id)
        if auth_hdr is None:
            self.counters["refused_no_header"] += 1
            self.rl.warning("no-header", "%s: refused a %s from %s: no AuthHeader", self.local_addr,
                            hdr.type_name(), msg.src)
            self._reject(hdr.type, msg.src, REASON_NO_HEADER)
            return False
        if self.token.authenticate(auth_hdr.token, msg.src, self):
            self.counters["accepted"] += 1
            return True
        self.counters["refused"] += 1
        self.rl.warning("refused", "%s: failed to validate AuthHeader token: refused a %s from %s", self.local_addr,
                        hdr.type_name(), msg.src)
        self._reject(hdr.type, msg.src, REASON_FAILED)
        return False

    def _reject(self, req_type: int, dest: Any, reason: str) -> None:
        if dest is None:
            return
        now = time.monotonic()
        if now - self._window >= 1.0:
            self._window, self._sent_in_window = now, 0
        if self._sent_in_window >= self.max_rejections_per_sec:
            self.counters["rejections_not_sent"] += 1
            return
        self._sent_in_window += 1
        if req_type in JOIN_REQS:
            rsp = Message(dest)
            rsp.put_header(self.gms_id, GmsHeader(H.JOIN_RSP, join_rsp=JoinRsp(None, None, reason)))
        else:
            rsp = Message(dest, None, None, Message.OOB)
            rsp.put_header(self.gms_id, GmsHeader(H.MERGE_RSP, merge_rejected=True))
        self.down_prot.down_msg(rsp)

"""The JGroups 2.12.2.Final wire dialect as data: every header class and data class, field by field.

Each entry says what Java's ``writeTo`` puts on the wire, in order (the wire types are explained in
:mod:`jgpy._core.wirespec`), under which magic number (``jg-magic-map.xml``) and Java class, which protocols file
it under their own id (``jg-protocol-ids.xml``), its type constants, and Java's ``size()`` where that is not the
sum of its fields' sizes. From this module the build generates the header classes and every codec
(``codegen.py``), and ``twin.py`` interprets it in Python (the test oracle, Java's sizes).

Adding a header class: one :class:`HeaderClass` entry in :data:`HEADERS` (its magic and Java class must be those of
the jar's magic map; a class of a custom protocol takes a magic > 1024 and its protocol an id > 512 in
:data:`PROTOCOL_IDS`). The header class, its codec and its Java size follow from the entry at the next build.
"""

from __future__ import annotations

from .wirespec import (ADDRESS, BOOL, BYTE, BYTE_BUFFER, GMS_VIEW, INT, INT_BYTES, LONG, OPT_SHORT_BYTES, SHORT, SHORT_BYTES,
                       STRING, SYNC_VIEW, USHORT, UTF, VIEW, DataClass, F, ForeignClass, HeaderClass, IP_BYTES, JAVA_OBJECT,
                       flagged_view, list_of, opt, opt_struct, struct, tagged, when)

NAME = "jgroups-2.12"
VERSION = 0x1302                     # 2.12.2: (2 << 11) + (12 << 6) + 2

#: How many levels of MergeView subgroups may nest on the wire (a MergeView inside the subgroups of a MergeView
#: inside ... : the top view is level 0, this is the deepest level). A MergeView's subgroups are the views
#: the subgroup coordinators had when the merge ran, so a subgroup is itself a MergeView only when its last
#: view came from a merge: one level per consecutive merge without a regular view (a join, leave or suspicion)
#: in between, typically 1 or 2, a few when a many-way partition heals in stages. 2.12 bounds nothing (its
#: recursion ends in a StackOverflowError, caught with the packet's other failures in TP.IncomingPacket);
#: jgpy fails a deeper MergeView with a WireFormatError: far above legitimate traffic, far below what the
#: C stack of any thread holds (the C recursion without a bound let a 1.2 MB TCP frame crash the process).
MAX_VIEW_DEPTH = 100

#: protocol id by the name used in XML stack configs (org.jgroups.protocols. prefix dropped): jg-protocol-ids.xml
PROTOCOL_IDS = {
    "FD": 2, "FD_SOCK": 3, "FRAG": 4, "FRAG2": 5, "PING": 6, "MPING": 7, "S3_PING": 8, "FILE_PING": 9,
    "TCPPING": 10, "TCPGOSSIP": 11, "UNICAST": 12, "VERIFY_SUSPECT": 13, "pbcast.GMS": 14,
    "pbcast.NAKACK": 15, "pbcast.STABLE": 16, "pbcast.STATE_TRANSFER": 17, "SMACK": 18, "COMPRESS": 19,
    "FC": 20, "UDP": 21, "TCP": 22, "TCP_NIO": 23, "TUNNEL": 24, "ENCRYPT": 25, "SEQUENCER": 26,
    "FD_SIMPLE": 27, "VIEW_SYNC": 28, "FD_ALL": 29, "SFC": 30, "pbcast.FLUSH": 31,
    "pbcast.STREAMING_STATE_TRANSFER": 32, "AUTH": 33, "MERGE3": 34, "MERGEFAST": 35, "HTOTAL": 36,
    "DISCARD": 37, "LOOPBACK": 38, "SHARED_LOOPBACK": 39, "UNICAST2": 40, "SCOPE": 41, "DAISYCHAIN": 42,
    "RELAY": 43, "MFC": 44, "UFC": 45, "JDBC_PING": 46, "STOMP": 47, "PRIO": 48, "BPING": 49,
    "CENTRAL_LOCK": 50, "PEER_LOCK": 51, "CENTRAL_EXECUTOR": 52,
    "blocks.PullPushAdapter": 200, "blocks.RequestCorrelator": 201, "mux.MuxChannel": 202,
    "mux.Multiplexer": 203, "blocks.mux.MuxRequestCorrelator": 204,
    # ---- jgpy's own protocols (not in the jar; for jgpy-only clusters): ids above 2.12's custom bound ----
    "TOTAL": 513,
    "JMS": 514,         # jgpy's transport through a message broker (seed 002's JMS; 2.12 no longer has one)
    "pbcast.PBCAST": 515,  # jgpy's gossip-based reliable multicast (seed 000's PBCAST; 2.12 no longer has one)
}

#: ids above this and magic numbers above that are custom (Java's ClassConfigurator reserves the ranges below
#: for JGroups itself): jgpy's own protocols and header classes live there, outside everything 2.12 uses
MAX_JGROUPS_PROTOCOL_ID = 512
MAX_JGROUPS_MAGIC = 1024

# every transport (TP and its subclasses) files its TpHeader under its own id; every discovery protocol
# (Discovery and its subclasses) its PingHeaders
TRANSPORTS = ("UDP", "TCP", "TCP_NIO", "TUNNEL", "LOOPBACK", "SHARED_LOOPBACK", "JMS")
DISCOVERY = ("PING", "MPING", "S3_PING", "FILE_PING", "TCPPING", "TCPGOSSIP", "JDBC_PING", "BPING")


# ---------------------------------------------------------------------------------------------
# data classes
# ---------------------------------------------------------------------------------------------

UUID = DataClass(
    "UUID", "uuid", "address", "util.UUID", magic=68, fields=(
        F("lsb", LONG, doc="leastSigBits, written first"),
        F("msb", LONG),
        F("additional_data", OPT_SHORT_BYTES, doc="deprecated 2.7-compat field"),
    ))
PAYLOAD_UUID = DataClass("PayloadUUID", "payload_uuid", "address", "util.PayloadUUID", magic=82, base=UUID,
                         fields=(F("payload", STRING),))
ADDITIONAL_DATA_UUID = DataClass("AdditionalDataUUID", "additional_data_uuid", "address", "util.AdditionalDataUUID",
                                 magic=83, base=UUID, fields=(F("payload", BYTE_BUFFER),))
TOPOLOGY_UUID = DataClass("TopologyUUID", "topology_uuid", "address", "util.TopologyUUID", magic=84, base=UUID,
                          fields=(F("site_id", STRING), F("rack_id", STRING), F("machine_id", STRING)))
IP_ADDRESS = DataClass(
    "IpAddress", "ip", "address", "stack.IpAddress", magic=1, codec="hand-written", min_bytes=8, fields=(
        F("ip", IP_BYTES, doc="Java fails on a length other than 4 or 16"),
        F("scope_id", INT, doc="only after a 16-byte address (a negative one reads as 0)"),
        F("port", USHORT),
        F("additional_data", OPT_SHORT_BYTES),
    ), doc="read_ip_body/write_ip_body in jg212.pyx: the layout depends on the address length")

VIEW_ID = DataClass("ViewId", "view_id", "types", "ViewId", magic=32, fields=(
    F("coord_addr", ADDRESS),
    F("id", LONG),
))
RANGE = DataClass("Range", "range", "types", "util.Range", fields=(F("low", LONG), F("high", LONG)))
ADDRESSES = list_of("addresses", ADDRESS, java_size="first_times_count")     # Util.writeAddresses
VIEW_CLS = DataClass(
    "View", "view", "types", "View", magic=31, codec="hand-written", fields=(
        F("vid", opt(VIEW_ID)),
        F("members", ADDRESSES),
        F("payload", SHORT_BYTES, doc="a Java-serialised Map<String,Object>, kept opaque"),
    ), doc="read_view_body/write_view_body in jg212.pyx: one function for View and MergeView, nesting bounded")
SUBGROUP = flagged_view(VIEW_CLS)           # a boolean (MergeView), then the view body one level deeper
MERGE_VIEW = DataClass(
    "MergeView", "merge_view", "types", "MergeView", base=VIEW_CLS, codec="hand-written", fields=(
        F("subgroups", list_of("subgroups", SUBGROUP, none=0), doc=f"at most {MAX_VIEW_DEPTH} levels deep"),
    ), doc="no magic number: Java writes its class name where a magic would go")
DIGEST_ENTRY = struct(F("member", ADDRESS, doc="never null"), F("low", LONG), F("highest_delivered", LONG),
                      F("highest_received", LONG))
DIGEST = DataClass(
    "Digest", "digest", "types", "util.Digest", magic=40, codec="hand-written", fields=(
        F("entries", list_of("digest_entries", DIGEST_ENTRY, negative="fail", java_size="first_times_count")),
    ), doc="read_digest_body in jg212.pyx: an entry needs a member and low <= highest_delivered, as Java's")
JOIN_RSP = DataClass("JoinRsp", "join_rsp", "types", "protocols.pbcast.JoinRsp", magic=39, fields=(
    F("view", opt(VIEW_CLS, as_plain_view=True), doc="Java reads it back as a plain View, whatever was written"),
    F("digest", opt(DIGEST)),
    F("fail_reason", STRING),
))
MERGE_ID = DataClass("MergeId", "merge_id", "types", "util.MergeId", fields=(
    F("initiator", ADDRESS),
    F("id", INT),
))
PING_DATA = DataClass("PingData", "ping_data", "types", "protocols.PingData", magic=36, fields=(
    F("own_addr", ADDRESS),
    F("view", VIEW),
    F("view_id", opt(VIEW_ID)),
    F("is_server", BOOL),
    F("logical_name", STRING),
    F("physical_addrs", ADDRESSES),
))

DATA_CLASSES = (UUID, PAYLOAD_UUID, ADDITIONAL_DATA_UUID, TOPOLOGY_UUID, IP_ADDRESS, VIEW_ID, RANGE, VIEW_CLS,
                MERGE_VIEW, DIGEST, JOIN_RSP, MERGE_ID, PING_DATA)


# ---------------------------------------------------------------------------------------------
# header classes
# ---------------------------------------------------------------------------------------------

# FD_SOCK's cache: member -> the address of its FD_SOCK server socket (a Java HashMap)
FD_SOCK_CACHE = list_of("fd_sock_cache", struct(F("member", ADDRESS), F("sock_addr", opt(IP_ADDRESS))), count=INT,
                        none=0, java_size="hash_map")

NAKACK_EXTRA = '''
    @staticmethod
    def msg(long long seqno):
        return NakAckHeader(1, seqno)

    @staticmethod
    def xmit_req(long long low, long long high, original_sender):
        from jgpy._core.types import Range
        return NakAckHeader(2, -1, Range(low, high), original_sender)

    @staticmethod
    def xmit_rsp(long long seqno):
        return NakAckHeader(3, seqno)
'''
NAKACK_EXTRA_STUB = '''
    @staticmethod
    def msg(seqno: int) -> NakAckHeader: ...
    @staticmethod
    def xmit_req(low: int, high: int, original_sender: Address | None) -> NakAckHeader: ...
    @staticmethod
    def xmit_rsp(seqno: int) -> NakAckHeader: ...
'''

# TOTAL's NEW_VIEW: the members that start afresh, each with the first sequence number it delivers
# STOMP's headers: a Java HashMap<String,String> (an int count, then key and value per entry, both writeUTF)
STOMP_HEADERS = list_of("stomp_headers", struct(F("key", UTF), F("value", UTF)), count=INT, none=0,
                        java_size="hash_map")

TOTAL_STARTS = list_of("total_starts", struct(F("member", ADDRESS), F("seqno", LONG)), none=0)

# PBCAST's XMIT_REQ: per original sender the run of seqnos asked for
PBCAST_XMIT_REQS = list_of("pbcast_xmit_reqs", struct(F("member", ADDRESS), F("first", LONG), F("last", LONG)),
                           none=0)

# AUTH's token (Util.writeAuthToken): the token's class name, then what that class's writeTo writes
AUTH_TOKEN = tagged("auth_token", {
    "org.jgroups.auth.SimpleToken": STRING,            # auth_value
    "org.jgroups.auth.MD5Token": STRING,               # auth_value (as configured: 2.12 hashes only in a constructor)
    "org.jgroups.auth.FixedMembershipToken": STRING,   # always "emptyToken"
    "org.jgroups.auth.RegexMembership": None,          # writes nothing
    "org.jgroups.auth.X509Token": BYTE_BUFFER,         # the RSA-encrypted auth_value
}, rejected=("org.jgroups.auth.AuthToken",))           # abstract: Java's newInstance() fails

REQUEST_CORRELATOR = HeaderClass(
    "RequestCorrelatorHeader", 71, "blocks.RequestCorrelator$Header", ("blocks.RequestCorrelator",),
    doc="MessageDispatcher/RpcDispatcher request or response", types={"REQ": 0, "RSP": 1}, fields=(
        F("type", BYTE, 0),
        F("id", LONG, 0),
        F("rsp_expected", BOOL, False),
        F("corr_id", SHORT, 201),
    ))

HEADERS = (
    # ---- hot headers: on every data message ----
    HeaderClass("TpHeader", 56, "protocols.TpHeader", TRANSPORTS, doc="Transport header: the cluster name, on every "
                "message", fields=(F("channel_name", UTF, ""),)),
    HeaderClass(
        "NakAckHeader", 25, "protocols.pbcast.NakAckHeader", ("pbcast.NAKACK",),
        doc="pbcast.NAKACK: seqno of a multicast, or a retransmission request",
        types={"MSG": 1, "XMIT_REQ": 2, "XMIT_RSP": 3}, extra=NAKACK_EXTRA, extra_stub=NAKACK_EXTRA_STUB, fields=(
            F("type", BYTE, 1),
            F("seqno", LONG, -1, when("MSG", "XMIT_RSP"), doc="-1 (Java's default) when the type carries none"),
            F("range", opt(RANGE), None, when("XMIT_REQ"), doc="Range, for XMIT_REQ"),
            F("sender", ADDRESS, None, when("XMIT_REQ"), doc="original sender, for XMIT_REQ"),
        )),
    HeaderClass(
        "UnicastHeader", 21, "protocols.UNICAST$UnicastHeader", ("UNICAST",),
        doc="UNICAST: DATA seqno/conn_id/first, cumulative ACK, or SEND_FIRST_SEQNO",
        types={"DATA": 0, "ACK": 1, "SEND_FIRST_SEQNO": 2},
        java_size={"DATA": 12, "ACK": 9, "SEND_FIRST_SEQNO": 1, None: 0}, fields=(
            F("type", BYTE, 0),
            F("seqno", LONG, 0, when("DATA", "ACK")),
            F("conn_id", SHORT, 0, when("DATA")),
            F("first", BOOL, False, when("DATA")),
        )),
    HeaderClass("FragHeader", 7, "protocols.FragHeader", ("FRAG", "FRAG2"),
                doc="FRAG/FRAG2: fragment ``frag_id`` of ``num_frags`` of message ``id``", fields=(
                    F("id", LONG, 0), F("frag_id", INT, 0), F("num_frags", INT, 0))),
    HeaderClass("FcHeader", 54, "protocols.FcHeader", ("FC", "MFC", "UFC"), doc="FC/MFC/UFC credit messages",
                types={"REPLENISH": 1, "CREDIT_REQUEST": 2}, fields=(F("type", BYTE, 1),)),

    # ---- control headers ----
    HeaderClass(
        "PingHeader", 13, "protocols.PingHeader", DISCOVERY,
        doc="Discovery request/response (PING, MPING, TCPPING, ...)", types={"GET_MBRS_REQ": 1, "GET_MBRS_RSP": 2},
        fields=(
            F("type", BYTE, 1),
            F("data", opt(PING_DATA), doc="PingData"),
            F("cluster_name", STRING),
            F("view_id", opt(VIEW_ID), doc="ViewId"),
        )),
    HeaderClass(
        "GmsHeader", 24, "protocols.pbcast.GMS$GmsHeader", ("pbcast.GMS",), doc="pbcast.GMS membership messages",
        types={"JOIN_REQ": 1, "JOIN_RSP": 2, "LEAVE_REQ": 3, "LEAVE_RSP": 4, "VIEW": 5, "MERGE_REQ": 6, "MERGE_RSP": 7,
               "INSTALL_MERGE_VIEW": 8, "CANCEL_MERGE": 9, "VIEW_ACK": 10, "JOIN_REQ_WITH_STATE_TRANSFER": 11,
               "INSTALL_MERGE_VIEW_OK": 12, "GET_DIGEST_REQ": 13, "GET_DIGEST_RSP": 14, "INSTALL_DIGEST": 15},
        fields=(
            F("type", BYTE, 0),
            F("view", GMS_VIEW),
            F("mbr", ADDRESS),
            F("mbrs", ADDRESSES, doc="tuple of addresses or None"),
            F("join_rsp", opt(JOIN_RSP)),
            F("my_digest", opt(DIGEST)),
            F("merge_id", opt(MERGE_ID)),
            F("merge_rejected", BOOL, False),
            F("use_flush_if_present", BOOL, False),
        )),
    HeaderClass(
        "Unicast2Header", 73, "protocols.UNICAST2$Unicast2Header", ("UNICAST2",), doc="UNICAST2 (NAK-based unicast)",
        types={"DATA": 0, "XMIT_REQ": 1, "SEND_FIRST_SEQNO": 2, "STABLE": 3},
        java_size={"DATA": 12, "XMIT_REQ": 17, "STABLE": 17, "SEND_FIRST_SEQNO": 1, None: 0}, fields=(
            F("type", BYTE, 0),
            F("seqno", LONG, 0, when("DATA", "XMIT_REQ", "STABLE", "SEND_FIRST_SEQNO")),
            F("high_seqno", LONG, 0, when("XMIT_REQ", "STABLE")),
            F("conn_id", SHORT, 0, when("DATA")),
            F("first", BOOL, False, when("DATA")),
        )),
    HeaderClass("StableHeader", 27, "protocols.pbcast.STABLE$StableHeader", ("pbcast.STABLE",),
                doc="pbcast.STABLE gossip and stability messages", types={"STABLE_GOSSIP": 1, "STABILITY": 2},
                fields=(F("type", INT, 1), F("stable_digest", opt(DIGEST)))),
    HeaderClass("FdHeader", 3, "protocols.FD$FdHeader", ("FD",),
                doc="FD heartbeats and suspicions. ``from_`` is Java's ``from``",
                types={"HEARTBEAT": 0, "HEARTBEAT_ACK": 1, "SUSPECT": 2},
                fields=(F("type", BYTE, 0), F("mbrs", ADDRESSES), F("from_", ADDRESS, java_name="from"))),
    HeaderClass("HeartbeatHeader", 61, "protocols.FD_ALL$HeartbeatHeader", ("FD_ALL",),
                doc="FD_ALL heartbeat: no fields", fields=()),
    HeaderClass(
        "FdSockHeader", 6, "protocols.FD_SOCK$FdHeader", ("FD_SOCK",), doc="FD_SOCK cache and suspicion messages",
        types={"SUSPECT": 10, "WHO_HAS_SOCK": 11, "I_HAVE_SOCK": 12, "GET_CACHE": 13, "GET_CACHE_RSP": 14},
        fields=(
            F("type", BYTE, 10),
            F("mbr", ADDRESS),
            F("sock_addr", opt(IP_ADDRESS), doc="IpAddress"),
            F("cached_addrs", FD_SOCK_CACHE, doc="tuple of (Address, IpAddress) or None"),
            F("mbrs", list_of("fd_sock_members", ADDRESS, count=INT, none=0, java_size="distinct"),
              doc="tuple of addresses or None"),
        )),
    HeaderClass("VerifyHeader", 22, "protocols.VERIFY_SUSPECT$VerifyHeader", ("VERIFY_SUSPECT",),
                doc="VERIFY_SUSPECT probe and answer", types={"ARE_YOU_DEAD": 1, "I_AM_NOT_DEAD": 2},
                fields=(F("type", SHORT, 1), F("from_", ADDRESS, java_name="from"))),
    HeaderClass("SfcHeader", 62, "protocols.SFC$Header", ("SFC",),
                doc="SFC credit messages; note the type values differ from FcHeader",
                types={"CREDIT_REQUEST": 1, "REPLENISH": 2, "URGENT_CREDIT_REQUEST": 3}, fields=(F("type", BYTE, 1),)),
    HeaderClass(
        "StateHeader", 28, "protocols.pbcast.STATE_TRANSFER$StateHeader", ("pbcast.STATE_TRANSFER",),
        doc="pbcast.STATE_TRANSFER request/response", types={"STATE_REQ": 1, "STATE_RSP": 2}, fields=(
            F("type", BYTE, 1),
            F("id", LONG, 0),
            F("sender", ADDRESS),
            F("my_digest", opt(DIGEST)),
            F("state_id", STRING),
        )),
    HeaderClass(
        "StreamingStateHeader", 65, "protocols.pbcast.STREAMING_STATE_TRANSFER$StateHeader",
        ("pbcast.STREAMING_STATE_TRANSFER",), doc="pbcast.STREAMING_STATE_TRANSFER messages",
        types={"STATE_REQ": 1, "STATE_RSP": 2, "STATE_PART": 3}, fields=(
            F("type", BYTE, 1),
            F("id", LONG, 0),
            F("sender", ADDRESS),
            F("my_digest", opt(DIGEST)),
            F("bind_addr", opt(IP_ADDRESS), doc="IpAddress of the state server socket"),
            F("state_id", STRING),
        )),
    HeaderClass(
        "FlushHeader", 64, "protocols.pbcast.FLUSH$FlushHeader", ("pbcast.FLUSH",), doc="pbcast.FLUSH phases",
        types={"START_FLUSH": 0, "STOP_FLUSH": 2, "FLUSH_COMPLETED": 3, "ABORT_FLUSH": 5, "FLUSH_BYPASS": 6,
               "FLUSH_RECONCILE": 7, "FLUSH_RECONCILE_OK": 8, "FLUSH_NOT_COMPLETED": 9}, fields=(
            F("type", BYTE, 0),
            F("view_id", LONG, 0),
            F("flush_participants", ADDRESSES),
            F("digest", opt(DIGEST)),
        )),
    HeaderClass("SequencerHeader", 58, "protocols.SEQUENCER$SequencerHeader", ("SEQUENCER",),
                doc="SEQUENCER total-order messages", types={"FORWARD": 1, "BCAST": 2, "WRAPPED_BCAST": 3},
                fields=(F("type", BYTE, 1), F("tag", opt(VIEW_ID), doc="ViewId(original sender, seqno)"))),
    HeaderClass("CompressHeader", 53, "protocols.COMPRESS$CompressHeader", ("COMPRESS",),
                doc="COMPRESS: size of the inflated payload", fields=(F("original_size", INT, 0),)),
    HeaderClass(
        "EncryptHeader", 57, "protocols.ENCRYPT$EncryptHeader", ("ENCRYPT",),
        doc="ENCRYPT: an encrypted message (ENCRYPT) or the key exchange (KEY_REQUEST with the requester's X.509 "
            "public key, SECRETKEY with the RSA-encrypted group key); ``version``: the key's MD5 as Java's "
            "``new String(md5, \"UTF-8\")``",
        types={"ENCRYPT": 0, "KEY_REQUEST": 1, "SERVER_PUBKEY": 2, "SECRETKEY": 3, "SECRETKEY_READY": 4},
        fields=(
            F("type", SHORT, 0),
            F("version", STRING, None, doc="key version (Java's size() counts it in UTF-16 chars + 2)"),
            F("encrypt_entire_msg", BOOL, False, doc="the payload is the encrypted Message.writeTo of the original"),
        )),
    HeaderClass("CoordAnnouncement", 69, "protocols.MERGE3$CoordAnnouncement", ("MERGE3",),
                doc="MERGE3 coordinator announcement", fields=(F("view", VIEW),)),
    REQUEST_CORRELATOR,
    HeaderClass("MultiDestinationHeader", 72, "blocks.RequestCorrelator$MultiDestinationHeader",
                ("blocks.RequestCorrelator",), doc="A request with an exclusion list", base=REQUEST_CORRELATOR,
                types=REQUEST_CORRELATOR.types, fields=(F("exclusion_list", ADDRESSES),)),
    HeaderClass("LockingHeader", 81, "protocols.Locking$LockingHeader", ("CENTRAL_LOCK", "PEER_LOCK"),
                doc="CENTRAL_LOCK/PEER_LOCK: marks a lock request or response (the Request is the payload)",
                fields=()),
    HeaderClass("ExecutorHeader", 85, "protocols.Executing$ExecutorHeader", ("CENTRAL_EXECUTOR",),
                doc="CENTRAL_EXECUTOR: marks an executor request or response (the Request is the payload)",
                fields=()),
    HeaderClass("AuthHeader", 67, "protocols.AuthHeader", ("AUTH",),
                doc="AUTH: the joiner's token on a JOIN_REQ / MERGE_REQ", java_size="encoded",
                fields=(F("token", AUTH_TOKEN, doc="(class name, body): the body a str (Simple, MD5, FixedMembership), "
                                                   "bytes (X509) or None"),)),

    # ---- 2.12 protocols outside the jar's stack configs but smack.xml (decoded in captures; of these, jgpy sends ----
    # ---- SMACK's, FD_SIMPLE's and MERGEFAST's: jgpy/protocols/smack.py, fd_simple.py, mergefast.py) ----
    HeaderClass("SmackHeader", 29, "protocols.SMACK$SmackHeader", ("SMACK",),
                doc="SMACK (simple multicast with acks): a multicast's seqno, its ack, join/leave announcements",
                types={"MCAST": 1, "ACK": 2, "JOIN_ANNOUNCEMENT": 3, "LEAVE_ANNOUNCEMENT": 4},
                fields=(F("type", BYTE, 0), F("seqno", LONG, -1))),
    HeaderClass("FdSimpleHeader", 59, "protocols.FD_SIMPLE$FdHeader", ("FD_SIMPLE",),
                doc="FD_SIMPLE heartbeat request and answer", types={"ARE_YOU_ALIVE": 1, "I_AM_ALIVE": 2},
                fields=(F("type", BYTE, 1),)),
    HeaderClass("MuxHeader", 63, "mux.MuxHeader", ("mux.MuxChannel", "mux.Multiplexer"),
                doc="the Multiplexer's (org.jgroups.mux): the service id, or a service message between Multiplexers",
                fields=(
                    F("id", STRING),
                    F("info", opt_struct(F("type", BYTE), F("service", STRING), F("host", ADDRESS),
                                         F("state", INT_BYTES)),
                      doc="ServiceInfo as (type, service, host, state) or None; type: SERVICE_UP=3 SERVICE_DOWN=4 "
                          "LIST_SERVICES_RSP=5 ACK=6 SERVICES_MERGED=7; state: bytes (empty reads back as None)"),
                )),
    HeaderClass("MergefastHeader", 70, "protocols.MERGEFAST$MergefastHeader", ("MERGEFAST",),
                doc="MERGEFAST: the coordinator's view", fields=(F("view", VIEW),)),
    HeaderClass("PullHeader", 66, "blocks.PullPushAdapter$PullHeader", ("blocks.PullPushAdapter",),
                doc="blocks.PullPushAdapter: the identifier of the listener a message is for (any Serializable, "
                    "Util.objectToStream); Java's size() is 12 without one, else 64 whatever it is",
                java_size=(12, 64), fields=(F("identifier", JAVA_OBJECT),)),
    HeaderClass("BlocksMuxHeader", 75, "blocks.mux.MuxHeader", ("blocks.mux.MuxRequestCorrelator",),
                doc="blocks.mux: the id of the multiplexed handler", fields=(F("id", SHORT, 0),)),
    HeaderClass("DaisyHeader", 76, "protocols.DAISYCHAIN$DaisyHeader", ("DAISYCHAIN",),
                doc="DAISYCHAIN: the hops a multicast still makes", fields=(F("ttl", SHORT, 0),)),
    HeaderClass("ViewSyncHeader", 60, "protocols.VIEW_SYNC$ViewSyncHeader", ("VIEW_SYNC",),
                doc="VIEW_SYNC: a member's view, or a request for everyone's", types={"VIEW_SYNC": 1, "VIEW_SYNC_REQ": 2},
                fields=(F("type", INT, 0), F("view", SYNC_VIEW))),
    HeaderClass("ScopeHeader", 74, "protocols.SCOPE$ScopeHeader", ("SCOPE",),
                doc="SCOPE: the scope of a message, or the expiry of one (Java fails on any other type; its "
                    "no-arg default type 0 cannot be written, jgpy's default is MSG)",
                types={"MSG": 1, "EXPIRE": 2}, closed=True, fields=(F("type", BYTE, 1), F("scope", SHORT, 0))),
    HeaderClass("RelayHeader", 77, "protocols.RELAY$RelayHeader", ("RELAY",),
                doc="RELAY between sites: ``type`` is the ordinal of Java's enum RelayHeader.Type (any other value "
                    "fails, as Java's Type.values()[ordinal])",
                types={"DISSEMINATE": 0, "FORWARD": 1, "VIEW": 2, "BROADCAST_VIEW": 3}, closed=True, fields=(
                    F("type", BYTE, 0),
                    F("original_sender", ADDRESS, None, when("DISSEMINATE")),
                )),
    HeaderClass("StompHeader", 78, "protocols.STOMP$StompHeader", ("STOMP",),
                doc="STOMP: a message or an endpoint announcement with its STOMP headers; ``type`` is the ordinal of "
                    "Java's enum StompHeader.Type (any other value fails)",
                types={"MESSAGE": 0, "ENDPOINT": 1}, closed=True, fields=(
                    F("type", INT, 0),
                    F("headers", STOMP_HEADERS, doc="tuple of (key, value) or None (Java's HashMap: a later "
                                                    "duplicate key wins)"),
                )),
    HeaderClass("PrioHeader", 80, "protocols.PrioHeader", ("PRIO",), doc="PRIO: the message's priority",
                fields=(F("priority", BYTE, 0),)),

    # ---- jgpy's own headers (magic > MAX_JGROUPS_MAGIC): not in the jar, jgpy-only clusters ----
    HeaderClass(
        "TotalHeader", 1025, "protocols.TOTAL$TotalHeader", ("TOTAL",),
        doc="jgpy's TOTAL (sequencer-based total order, seed 003; the type names are the paper's, without "
            "TOTAL_): a member's REQUEST to the sequencer, the sequencer's BCAST, retransmission (RESEND), "
            "acknowledgements (CUM_SEQ_ACK), stability (STABLE) and the view change (NEW_VIEW_ACK to the new "
            "sequencer, NEW_VIEW from it). UNICAST and SEQ_ACK are the paper's and never sent",
        types={"UNICAST": 0, "BCAST": 1, "REQUEST": 2, "NEW_VIEW": 3, "NEW_VIEW_ACK": 4, "CUM_SEQ_ACK": 5,
               "SEQ_ACK": 6, "RESEND": 7, "STABLE": 8},
        fields=(
            F("type", BYTE, 1),
            F("view_id", LONG, 0, doc="the epoch: the id of the view whose NEW_VIEW started the sequence this "
                                      "message belongs to (NEW_VIEW, NEW_VIEW_ACK: the new view's id)"),
            F("seqno", LONG, 0, when("BCAST", "NEW_VIEW", "NEW_VIEW_ACK", "CUM_SEQ_ACK", "SEQ_ACK", "RESEND",
                                     "STABLE"),
              doc="BCAST: the global sequence number; RESEND: the first one asked for; CUM_SEQ_ACK: the highest "
                  "received without a gap; STABLE: the highest every member has; NEW_VIEW_ACK: the reporter's "
                  "highest without a gap; NEW_VIEW: the last of the old sequence"),
            F("high", LONG, 0, when("RESEND", "NEW_VIEW_ACK", "STABLE"),
              doc="RESEND: the last one asked for; NEW_VIEW_ACK: the last seqno of ``prev_epoch``; STABLE: the "
                  "highest the sequencer assigned (a member missing the tail asks for it)"),
            F("req_id", LONG, 0, when("REQUEST", "BCAST"), doc="the original sender's number of the message"),
            F("sender", ADDRESS, None, when("BCAST"), doc="the original sender"),
            F("epoch", opt(VIEW_ID), None, when("NEW_VIEW", "NEW_VIEW_ACK"),
              doc="NEW_VIEW: the sequencer's epoch (the ViewId) it continues; NEW_VIEW_ACK: the reporter's"),
            F("prev_epoch", opt(VIEW_ID), None, when("NEW_VIEW_ACK"), doc="the epoch before the reporter's"),
            F("starts", TOTAL_STARTS, None, when("NEW_VIEW"),
              doc="members that start afresh (joiners), each with the first seqno it delivers"),
        )),
    HeaderClass(
        "PbcastHeader", 1026, "protocols.pbcast.PBCAST$PbcastHeader", ("pbcast.PBCAST",),
        doc="jgpy's PBCAST (gossip-based reliable multicast, seed 000; type numbers as 2.2's PbcastHeader): a "
            "multicast with its seqno (MCAST_MSG), a gossip with its originator's digest and not-seen list "
            "(GOSSIP), a retransmission request to the gossip's originator (XMIT_REQ) and the retransmitted "
            "message (XMIT_RSP, one per message). NOT_MEMBER (2.2's shunning) is never sent",
        types={"MCAST_MSG": 0, "GOSSIP": 1, "XMIT_REQ": 2, "XMIT_RSP": 3, "NOT_MEMBER": 4},
        fields=(
            F("type", BYTE, 0),
            F("seqno", LONG, 0, when("MCAST_MSG", "XMIT_RSP"), doc="the original sender's seqno of the message"),
            F("sender", ADDRESS, None, when("XMIT_RSP"), doc="the original sender (the message's src is the "
                                                               "member that retransmits it)"),
            F("gossip_id", LONG, 0, when("GOSSIP"), doc="the originator's gossip round: (origin, gossip_id) "
                                                         "identifies a gossip"),
            F("origin", ADDRESS, None, when("GOSSIP"), doc="the member that started the gossip (a forwarded "
                                                           "gossip's src is the forwarder)"),
            F("digest", opt(DIGEST), None, when("GOSSIP"),
              doc="the originator's digest: per sender (low, highest delivered, highest received)"),
            F("not_seen", ADDRESSES, None, when("GOSSIP"),
              doc="members the gossip has not reached yet (None: a multicast gossip, never forwarded)"),
            F("seen", ADDRESSES, None, when("GOSSIP"), doc="members the gossip went through"),
            F("xmit_reqs", PBCAST_XMIT_REQS, None, when("XMIT_REQ"),
              doc="per original sender, the first and last seqno asked for"),
        )),
)

#: classes of the magic map jgpy does not model, with the protocols that file them under their id
FOREIGN_CLASSES = (
    ForeignClass(30, "Message"),
    ForeignClass(34, "Address"),
    ForeignClass(38, "java.util.Vector"),
    ForeignClass(41, "java.util.Hashtable"),
    ForeignClass(86, "protocols.Executing$Request"),
    ForeignClass(87, "blocks.executor.ExecutionService$RunnableAdapter"),
    ForeignClass(88, "blocks.executor.Executions$StreamableCallable"),
)


def magic_classes() -> dict[int, str]:
    """``jg-magic-map.xml``: class (``org.jgroups.`` dropped, java.util kept) by magic number."""
    table = {c.magic: c.java for c in (*HEADERS, *FOREIGN_CLASSES) if c.magic is not None}
    table.update({c.magic: c.java for c in DATA_CLASSES if c.magic is not None})
    return dict(sorted(table.items()))


def header_magics() -> dict[str, tuple[int, ...]]:
    """The magic numbers of the header classes each 2.12 protocol files under its own id, by protocol name."""
    out: dict[str, tuple[int, ...]] = {}
    for c in (*HEADERS, *FOREIGN_CLASSES):
        for name in c.protocols:
            out[name] = out.get(name, ()) + (c.magic,)
    return out

"""AUTH with each 2.12 token: the jar's auth_simple.xml, auth_md5.xml and auth_fixedlist.xml unchanged,
auth_X509.xml with its keystore path pointing at a keystore made with the JDK's keytool, auth_regex.xml with its
address pattern matching loopback; the
unchanged auth_fixedlist.xml lists "localhost/1010*localhost/1011", which no member's address ever is (2.12
compares the textual IP address), so it refuses every joiner: clusters that must form list 127.0.0.1 instead.

Mixed clusters with a Java and with a jgpy coordinator, traffic both ways; a joiner with a wrong or missing token
refused in both directions; tokens on their own; a hostile joiner against a jgpy coordinator."""

from __future__ import annotations

import random
import struct
import subprocess
import time

import pytest

from jgpy import DIALECT, Message, UUID
from jgpy.errors import ConfigError, WireFormatError
from jgpy.headers import AuthHeader, GmsHeader
from jgpy.protocols.auth_tokens import (FixedMembershipToken, X509Token, create_token, java_equals_ignore_case,
                                        java_ip_string)
from jgpy.protocols.pbcast.gms import AuthRejectedError, JoinRejectedError
from jgpy.testing.cluster import make_member, stock, wait_all
from jgpy.testing.hostile import Forger, auth_attacks, send_datagrams
from jgpy.testing.java import JavaError, udp_props, unique_group
from jgpy._core.address import IpAddress
from tests.conftest import require_java
from tests.test_stack_interop import Cluster, exchange

pytestmark = pytest.mark.timeout(300)

SIMPLE = "org.jgroups.auth.SimpleToken"
ID_AUTH = 33
MAGIC_AUTH = 67
LOOPBACK_PATTERN = r"127\.0\.0\.\d{1,3}(:\d{1,5})?"


# ---- configs ----

@pytest.fixture(scope="module")
def keystores(tmp_path_factory):
    """Two JKS keystores made by the JDK's keytool, each with an RSA key pair under the alias "test" (the
    alias auth_X509.xml names, password "changeit" as in the file); the second is another key pair."""
    d = tmp_path_factory.mktemp("keystores")
    paths = []
    for name in ("defaultStore.keystore", "other.keystore"):
        path = d / name
        try:
            subprocess.run(["keytool", "-genkeypair", "-alias", "test", "-keyalg", "RSA", "-keysize", "2048",
                            "-dname", "CN=jgpy-test", "-validity", "2", "-storetype", "JKS", "-keystore", str(path),
                            "-storepass", "changeit", "-keypass", "changeit"], check=True, capture_output=True,
                           timeout=60)
        except FileNotFoundError:
            pytest.skip("the JDK's keytool is not installed")
        paths.append(str(path))
    return paths


def x509(keystore: str, **props):
    return stock("auth_X509.xml").with_properties("AUTH", keystore_path=keystore, **props)


def regex(pattern: str = LOOPBACK_PATTERN):
    return stock("auth_regex.xml").with_properties("AUTH", match_string=pattern)


def configs(case: str, keystores) -> tuple:
    """``(accepting config, (coordinator's config, joiner's config) of a refusal)`` of a token."""
    if case == "simple":
        cfg = stock("auth_simple.xml")
        return cfg, (cfg, cfg.with_properties("AUTH", auth_value="wrong"))
    if case == "md5":
        cfg = stock("auth_md5.xml")
        return cfg, (cfg, cfg.with_properties("AUTH", auth_value="chri"))
    if case == "fixedlist":
        unchanged = stock("auth_fixedlist.xml")
        return unchanged.with_properties("AUTH", fixed_members_value="127.0.0.1"), (unchanged, unchanged)
    if case == "x509":
        cfg = x509(keystores[0])
        return cfg, (cfg, x509(keystores[1]))
    if case == "regex":
        return regex(), (regex(r"(192\.168|10\.5)\.\d{1,3}\.\d{1,3}(:\d{1,5})?"), regex())
    raise ValueError(case)


CASES = ("simple", "md5", "fixedlist", "x509", "regex")


@pytest.fixture
def clusters():
    require_java()
    made: list[Cluster] = []

    def make(kinds: str, java_config, jgpy_config) -> Cluster:
        c = Cluster(kinds, config=java_config, jgpy_config=jgpy_config)
        made.append(c)
        return c
    yield make
    for c in made:
        c.close()


# ---- mixed clusters ----

@pytest.mark.interop
@pytest.mark.parametrize("kinds", ["JPP", "PJJ"])
@pytest.mark.parametrize("case", CASES)
def test_mixed_cluster_forms_and_carries_traffic_both_ways(clusters, keystores, case, kinds):
    """The first member is the coordinator that checks the others' tokens."""
    cfg, _ = configs(case, keystores)
    c = clusters(kinds, cfg, cfg)
    c.start()
    c.assert_agreement()
    exchange(c, 20, 5)
    coord = c.members[0]
    if coord.kind == "jgpy":
        assert coord.stats()["AUTH"]["accepted"] == 2
        assert coord.stats()["AUTH"]["refused"] == 0


@pytest.mark.interop
@pytest.mark.parametrize("case", CASES)
def test_java_coordinator_refuses_a_jgpy_joiner_with_a_clear_error(clusters, keystores, case):
    _, (coord_cfg, joiner_cfg) = configs(case, keystores)
    c = clusters("JP", coord_cfg, joiner_cfg)
    j, p = c.members
    j.connect(c.name)
    with pytest.raises(AuthRejectedError) as e:
        p.connect(c.name)
    assert "AUTH" in str(e.value) and "Authentication failed" in str(e.value)
    assert e.value.coord is not None and str(e.value.coord) == "J1"
    assert j.view_names() == ["J1"]


@pytest.mark.interop
@pytest.mark.parametrize("case", CASES)
def test_jgpy_coordinator_refuses_a_java_joiner(clusters, keystores, case):
    _, (coord_cfg, joiner_cfg) = configs(case, keystores)
    c = clusters("PJ", joiner_cfg, coord_cfg)
    p, j = c.members
    p.connect(c.name)
    with pytest.raises(JavaError) as e:
        j.connect(c.name)
    assert "SecurityException: Authentication failed" in str(e.value)
    assert p.view_names() == ["P1"]
    assert p.stats()["AUTH"]["refused"] >= 1


@pytest.mark.interop
@pytest.mark.parametrize("kinds", ["JP", "PJ"])
def test_a_joiner_without_auth_is_refused_both_ways(clusters, kinds):
    cfg = stock("auth_simple.xml")
    without = cfg.remove("AUTH")
    c = clusters(kinds, cfg if kinds[0] == "J" else without, cfg if kinds[0] == "P" else without)
    c.members[0].connect(c.name)
    if kinds == "JP":
        with pytest.raises(AuthRejectedError, match="Failed to find an AuthHeader in Message"):
            c.members[1].connect(c.name)
    else:
        with pytest.raises(JavaError, match="SecurityException: Failed to find an AuthHeader in Message"):
            c.members[1].connect(c.name)
        assert c.members[0].stats()["AUTH"]["refused_no_header"] >= 1
    assert c.members[0].view_names() == [c.members[0].name]


# ---- tokens on their own ----

def test_token_properties_are_2_12s_and_checked():
    with pytest.raises(ConfigError, match="not a 2.12 token"):
        create_token("org.example.Token", {})
    with pytest.raises(ConfigError, match="match_string is not a property of org.jgroups.auth.SimpleToken"):
        create_token(SIMPLE, {"auth_value": "x", "match_string": "y"})
    with pytest.raises(ConfigError, match="needs auth_value"):
        create_token(SIMPLE, {})
    with pytest.raises(ConfigError, match="match_string cannot be null"):
        create_token("org.jgroups.auth.RegexMembership", {})
    with pytest.raises(ConfigError, match="has to be true"):
        create_token("org.jgroups.auth.RegexMembership", {"match_string": ".*", "match_ip_address": "false"})
    with pytest.raises(ConfigError, match="unknown property"):
        from jgpy.channel import Channel
        Channel(stock("auth_simple.xml").with_properties("AUTH", no_such_thing="1"), "x", {}, None)


def test_simple_and_md5_tokens_compare_the_value_as_java_does():
    t = create_token("org.jgroups.auth.MD5Token", {"auth_value": "chris", "token_hash": "MD5"})
    assert t.body() == "chris"                       # 2.12 hashes only in a constructor no config calls
    assert t.authenticate(("org.jgroups.auth.MD5Token", "CHRIS"), None, None)
    assert not t.authenticate((SIMPLE, "chris"), None, None)            # another token class
    assert not t.authenticate(("org.jgroups.auth.MD5Token", None), None, None)
    assert not t.authenticate(None, None, None)
    assert java_equals_ignore_case("stra\u00dfe", "STRA\u00dfE") and not java_equals_ignore_case("ss", "\u00df")


class _Auth:
    """What a token asks AUTH: physical addresses and names."""

    def __init__(self, phys=None, name=None):
        self.phys, self.name, self.local_addr = phys, name, None
        from jgpy.stack.logutil import RateLimitedLog
        import logging
        self.rl = RateLimitedLog(logging.getLogger("test"))

    def physical_address(self, addr):
        return self.phys

    def logical_name(self, addr):
        return self.name


def test_fixed_membership_matches_host_or_host_and_port():
    t = create_token("org.jgroups.auth.FixedMembershipToken",
                     {"fixed_members_value": "127.0.0.1/7800*10.0.0.5", "fixed_members_seperator": "*"})
    assert isinstance(t, FixedMembershipToken) and t.members == ["127.0.0.1:7800", "10.0.0.5"]
    tok = (t.NAME, "emptyToken")
    assert t.authenticate(tok, UUID(1, 2), _Auth(IpAddress("127.0.0.1", 7800)))
    assert not t.authenticate(tok, UUID(1, 2), _Auth(IpAddress("127.0.0.1", 7801)))
    assert t.authenticate(tok, UUID(1, 2), _Auth(IpAddress("10.0.0.5", 1)))
    assert not t.authenticate(tok, UUID(1, 2), _Auth(None))                  # no physical address known
    assert not t.authenticate((SIMPLE, "x"), UUID(1, 2), _Auth(IpAddress("10.0.0.5", 1)))
    assert java_ip_string(IpAddress("::1", 5)) == "0:0:0:0:0:0:0:1:5"         # Java's getHostAddress()


def test_regex_membership_matches_address_or_name():
    t = create_token("org.jgroups.auth.RegexMembership", {"match_string": "groucho|127\\.0\\.0\\.1:\\d+",
                                                          "match_logical_name": "true"})
    assert t.authenticate(None, UUID(1, 2), _Auth(IpAddress("127.0.0.1", 9)))
    assert not t.authenticate(None, UUID(1, 2), _Auth(IpAddress("127.0.0.2", 9)))
    assert t.authenticate(None, UUID(1, 2), _Auth(IpAddress("127.0.0.2", 9), "groucho"))
    assert not t.authenticate(None, UUID(1, 2), _Auth(None, "grouchos"))     # the whole name must match


@pytest.mark.processes          # keytool
def test_x509_token_encrypts_for_the_certificate_and_checks_what_it_decrypts(keystores):
    props = {"auth_value": "chris", "keystore_path": keystores[0], "keystore_password": "changeit",
             "cert_alias": "test", "cipher_type": "RSA"}
    t = create_token("org.jgroups.auth.X509Token", props)
    assert isinstance(t, X509Token) and len(t.body()) == 256                 # RSA-2048
    assert t.authenticate((t.NAME, t.body()), None, _Auth())
    assert t.authenticate((t.NAME, create_token(t.NAME, {**props, "auth_value": "CHRIS"}).body()), None, _Auth())
    assert not t.authenticate((t.NAME, create_token(t.NAME, {**props, "auth_value": "x"}).body()), None, _Auth())
    other = create_token(t.NAME, {**props, "keystore_path": keystores[1]})
    assert not t.authenticate((t.NAME, other.body()), None, _Auth())        # another key pair
    assert not t.authenticate((t.NAME, b"\x00" * 256), None, _Auth())        # garbage: refused, no exception
    assert not t.authenticate((t.NAME, b""), None, _Auth())
    assert not t.authenticate((t.NAME, None), None, _Auth())
    with pytest.raises(ConfigError, match="no private key entry 'nope'"):
        create_token(t.NAME, {**props, "cert_alias": "nope"})
    with pytest.raises(ConfigError, match="keystore"):
        create_token(t.NAME, {**props, "keystore_password": "wrong"})


def test_auth_header_decoding_follows_java():
    """C codec and twin alike: a class 2.12 cannot find is no token and nothing after its name is read
    (Util.readAuthToken); a null name, the abstract AuthToken, truncation and absurd lengths fail."""
    from jgpy._core import spec212
    from jgpy._core.twin import Twin
    twin = Twin(spec212, DIALECT)
    ok = AuthHeader((SIMPLE, "chris"))
    assert DIALECT.decode_header(MAGIC_AUTH, DIALECT.encode_header(ok)) == ok
    unknown = struct.pack(">?H", True, 9) + b"org.x.Foo"
    assert DIALECT.decode_header(MAGIC_AUTH, unknown).token == ("org.x.Foo", None)
    assert twin.decode_header(MAGIC_AUTH, unknown)[0].token == ("org.x.Foo", None)
    for bad in (b"\x00", struct.pack(">?H", True, 26) + b"org.jgroups.auth.AuthToken", b"\x01\x00\x50abc",
                struct.pack(">?H", True, 26) + b"org.jgroups.auth.X509Token" + b"\x01\x7f\xff\xff\xff"):
        with pytest.raises(WireFormatError):
            DIALECT.decode_header(MAGIC_AUTH, bad)
        with pytest.raises(WireFormatError):
            twin.decode_header(MAGIC_AUTH, bad)
    with pytest.raises(WireFormatError):
        DIALECT.encode_header(AuthHeader(None))                  # Java cannot write a header without a token


# ---- a hostile joiner against a jgpy coordinator ----

def test_hostile_joiners_are_refused_counted_and_the_coordinator_stays_well():
    addr, port = unique_group()
    props = udp_props(addr, port)
    cfg = stock("auth_simple.xml")
    coord = make_member("P", "P1", cfg, props)
    late = make_member("P", "P2", cfg, props)
    try:
        name = f"auth-hostile-{random.getrandbits(32):x}"
        coord.connect(name)
        tp = coord.channel.stack.transport
        to = (tp.physical_addr.host, tp.physical_addr.port)
        me = coord.channel.address

        sent = send_datagrams(auth_attacks(Forger(name), random.Random(5), me, 30), to)
        assert sum(sent.values()) == 210
        stats = lambda: coord.stats()                                          # noqa: E731
        # every refused request counted; rejection answers capped per second (the rest dropped and counted)
        assert wait_all(lambda: stats()["AUTH"]["refused"] + stats()["AUTH"]["refused_no_header"] >= 120, 20), \
            stats()["AUTH"]
        a = stats()["AUTH"]
        udp = stats()["UDP"]
        # lies about the token (30 each: wrong value, another class, a made-up class) are refused; garbage,
        # truncated and absurd headers make their message malformed (dropped by the transport, never reach AUTH)
        assert a["accepted"] == 0 and a["refused"] >= 90 and a["refused_no_header"] == 30, a
        assert udp["dropped_malformed"] >= 60, udp
        assert a["rejections_not_sent"] > 0 and a["failed_msgs"] == 0, a
        assert coord.view_names() == ["P1"]
        late.connect(name)                                                   # the real joiner still gets in
        assert wait_all(lambda: coord.view_names() == ["P1", "P2"], 20)
        assert stats()["AUTH"]["accepted"] == 1
    finally:
        late.close()
        coord.close()


def test_the_decoder_shows_auth_headers():
    from jgpy.headers import TpHeader
    from jgpy.tools.dump import describe_datagram
    lines = []
    for token in ((SIMPLE, "chris"), ("org.jgroups.auth.X509Token", bytes(range(200)))):
        m = Message(UUID(1, 2), None, UUID(3, 4))
        m.put_header(ID_AUTH, AuthHeader(token))
        m.put_header(21, TpHeader("c"))
        lines += describe_datagram(DIALECT.encode_message(m))
    text = "\n".join(lines)
    assert "AUTH(33): AuthHeader(token=('org.jgroups.auth.SimpleToken', 'chris'))" in text
    assert "AUTH(33): AuthHeader(token=('org.jgroups.auth.X509Token', 200 bytes 000102030405060708090a0b0c0d0e0f...))" \
        in text


def test_merge_and_join_requests_are_checked_below_gms():
    """Down, JOIN_REQ / MERGE_REQ get our token; up, a request without one is refused as 2.12 refuses it (a
    JoinRsp with the reason, a MERGE_RSP marked rejected, OOB) and never reaches GMS; other GMS messages pass."""
    from jgpy.protocols.auth import AUTH
    from tests.fakestack import FakeStack
    prot = AUTH()
    prot.auth_class, prot.auth_value = SIMPLE, "chris"
    s = FakeStack(prot, loopback=False)
    try:
        me, peer = s.local_addr, UUID(7, 7)
        for t in (GmsHeader.JOIN_REQ, GmsHeader.MERGE_REQ, GmsHeader.LEAVE_REQ):
            m = Message(peer)
            m.put_header(14, GmsHeader(t, mbr=me))
            s.send(m)
        auth = [x.msg.get_header(ID_AUTH) for x in s.tp.sent]
        assert auth == [AuthHeader((SIMPLE, "chris")), AuthHeader((SIMPLE, "chris")), None]
        s.tp.clear()

        def req(t, token=None, hdr=True):
            m = Message(me, None, peer)
            m.put_header(14, GmsHeader(t, mbr=peer))
            if hdr:
                m.put_header(ID_AUTH, AuthHeader(token))
            return m
        ok, view = req(GmsHeader.JOIN_REQ, (SIMPLE, "CHRIS")), req(GmsHeader.VIEW_ACK, hdr=False)
        s.tp.inject([req(GmsHeader.MERGE_REQ, hdr=False), ok, req(GmsHeader.MERGE_REQ, (SIMPLE, "x")), view,
                     req(GmsHeader.JOIN_REQ_WITH_STATE_TRANSFER, hdr=False)])
        assert s.top.messages == [ok, view]
        rsps = [(x.msg.dest, x.msg.flags & Message.OOB, x.msg.get_header(14)) for x in s.tp.sent]
        assert [(d, bool(oob), h.type, h.merge_rejected) for d, oob, h in rsps] == [
            (peer, True, GmsHeader.MERGE_RSP, True), (peer, True, GmsHeader.MERGE_RSP, True),
            (peer, False, GmsHeader.JOIN_RSP, False)]
        assert rsps[2][2].join_rsp.fail_reason == "Failed to find an AuthHeader in Message"
        assert prot.dump_stats() == {"accepted": 1, "refused": 1, "refused_no_header": 2, "rejections_not_sent": 0,
                                     "failed_msgs": 0}
    finally:
        s.close()


@pytest.mark.interop
@pytest.mark.processes
@pytest.mark.parametrize("kinds", ["Jp", "pJ"])
def test_a_partitioned_auth_cluster_merges_again(monkeypatch, kinds):
    """auth_simple.xml (DISCARD added, MERGE2 sooner) split in two and healed: the MERGE_REQs carry tokens that
    the other side's AUTH (Java's or jgpy's) accepts, and the merge completes."""
    require_java()
    from tests import test_merge
    cfg = stock("auth_simple.xml").insert("DISCARD", {}, after="UDP") \
        .with_properties("MERGE2", min_interval="3000", max_interval="6000")
    monkeypatch.setattr(test_merge, "merge_config", lambda: cfg)
    c = test_merge.ProcCluster(kinds)
    try:
        c.start()
        assert c.agree(c.members, 30)
        c.partition([[c.members[0]], [c.members[1]]])
        assert wait_all(lambda: all(m.view_names() == [m.name] for m in c.members), 60), \
            [m.view_names() for m in c.members]
        c.heal()
        assert c.agree(c.members, 90), [(m.view_id(), m.view_names()) for m in c.members]
        p = next(m for m in c.members if m.kind == "jgpy")
        assert p.stats()["AUTH"]["refused"] == 0 and p.stats()["AUTH"]["refused_no_header"] == 0
    finally:
        c.close()


def test_mutated_join_requests_with_tokens_decode_as_java_decodes_them(java_codec):
    """The differential fuzz of tests/test_bad_input.py on JOIN_REQs carrying each token: jgpy accepts exactly the
    mutations the Java 2.12.2 classes accept, with the same fields."""
    from jgpy.headers import TpHeader
    from tests.test_bad_input import differential
    seeds = []
    for token in ((SIMPLE, "chris"), ("org.jgroups.auth.MD5Token", "chris"),
                  ("org.jgroups.auth.FixedMembershipToken", "emptyToken"), ("org.jgroups.auth.RegexMembership", None),
                  ("org.jgroups.auth.X509Token", bytes(range(40)))):
        m = Message(UUID(1, 2), None, UUID(3, 4), Message.OOB)
        m.put_header(ID_AUTH, AuthHeader(token)).put_header(14, GmsHeader(GmsHeader.JOIN_REQ, mbr=UUID(3, 4)))
        m.put_header(21, TpHeader("jgtest"))
        seeds.append(DIALECT.encode_message(m))
    disagree = differential(java_codec, seeds, 600, random.Random(7))
    assert not disagree, f"{len(disagree)} datagrams decoded differently by jgpy and Java: {disagree[:3]}"

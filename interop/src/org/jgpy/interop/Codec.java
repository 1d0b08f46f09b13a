package org.jgpy.interop;

import org.jgroups.Address;
import org.jgroups.Header;
import org.jgroups.Message;
import org.jgroups.View;
import org.jgroups.conf.ClassConfigurator;
import org.jgroups.stack.IpAddress;
import org.jgroups.util.Digest;
import org.jgroups.util.Headers;
import org.jgroups.util.MutableDigest;
import org.jgroups.util.Streamable;
import org.jgroups.util.Util;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.ObjectInputStream;
import java.lang.invoke.MethodHandle;
import java.lang.invoke.MethodHandles;
import java.lang.reflect.Constructor;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.math.BigInteger;
import java.net.Inet6Address;
import java.net.InetAddress;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.Vector;
import java.util.concurrent.ConcurrentHashMap;

/**
 * JSON value &lt;-&gt; real JGroups 2.12 objects, and encode/decode of every kind listed in interop/PROTOCOL.md.
 *
 * <p>Objects are always built as the real JGroups classes (public constructors where they are usable, otherwise
 * the no-arg constructor plus reflection on the (package-)private fields) and are serialized / parsed only by the
 * JGroups classes' own code (writeTo/readFrom, Util.*, TP.writeMessage/writeMessageList/readMessageList).</p>
 */
final class Codec {
    private Codec() {}

    static final String PKG="org.jgroups.";

    // TP's tp_flags bits (TP.LIST, TP.MULTICAST, TP.OOB)
    static final byte TP_LIST=1, TP_MULTICAST=2, TP_OOB=4;

    // ------------------------------------------------------------------ field table

    /** Value types of fields. */
    enum T {BYTE, SHORT, INT, LONG, BOOL, STRING, HEX, ADDR, IPADDR, ADDRS, ADDR_SET, IPMAP,
            VIEW, VIEWID, DIGEST, JOINRSP, MERGEID, PINGDATA, RANGE, VIEWS, PAYLOAD, AUTHTOKEN,
            ENUM,      // a Java enum field as its ordinal
            STRMAP,    // a Map<String,String> as [[key, value], ...] (the given order)
            SERVICEINFO,   // mux.ServiceInfo as [type, service, host, state (hex)]
            JOBJECT}       // an Object written with Util.objectToStream, as a JavaObject (null: null)

    static final class F {
        final String json, java; final T t; final Class<?> coll;
        F(String json, String java, T t, Class<?> coll) {this.json=json; this.java=java; this.t=t; this.coll=coll;}
    }

    static final class Kind {
        final String key; final Class<?> cls; final F[] fields;
        Kind(String key, Class<?> cls, F[] fields) {this.key=key; this.cls=cls; this.fields=fields;}
    }

    static final Map<String,Kind>   KINDS=new LinkedHashMap<>();
    static final Map<Class<?>,Kind> BY_CLASS=new HashMap<>();

    static F f(String json, T t)               {return new F(json, json, t, null);}
    static F f(String json, String java, T t)  {return new F(json, java, t, null);}
    static F c(String json, T t, Class<?> col) {return new F(json, json, t, col);}
    static F c(String json, String java, T t, Class<?> col) {return new F(json, java, t, col);}

    static F[] cat(F[] a, F... b) {
        F[] r=new F[a.length + b.length];
        System.arraycopy(a, 0, r, 0, a.length);
        System.arraycopy(b, 0, r, a.length, b.length);
        return r;
    }

    static void reg(String key, F... fields) {
        try {
            Class<?> cls=Class.forName(PKG + key);
            Kind k=new Kind(key, cls, fields);
            KINDS.put(key, k);
            BY_CLASS.put(cls, k);
        }
        catch(ClassNotFoundException e) {
            throw new IllegalStateException("JGroups class " + PKG + key + " not found", e);
        }
    }

    static final F[] UUID_F={f("msb", "mostSigBits", T.LONG), f("lsb", "leastSigBits", T.LONG), f("additional_data", T.HEX)};
    static final F[] VIEW_F={f("vid", T.VIEWID), c("members", T.ADDRS, Vector.class), f("payload", T.PAYLOAD)};
    static final F[] REQCORR_F={f("type", T.BYTE), f("id", T.LONG), f("rsp_expected", T.BOOL), f("corr_id", "corrId", T.SHORT)};

    static {
        // addresses (stack.IpAddress is special-cased)
        reg("util.UUID", UUID_F);
        reg("util.PayloadUUID", cat(UUID_F, f("payload", T.STRING)));
        reg("util.AdditionalDataUUID", cat(UUID_F, f("payload", T.HEX)));
        reg("util.TopologyUUID", cat(UUID_F, f("site_id", T.STRING), f("rack_id", T.STRING), f("machine_id", T.STRING)));
        // data classes (util.Digest and Message are special-cased)
        reg("ViewId", f("coord_addr", T.ADDR), f("id", T.LONG));
        reg("View", VIEW_F);
        reg("MergeView", cat(VIEW_F, f("subgroups", T.VIEWS)));
        reg("protocols.pbcast.JoinRsp", f("view", T.VIEW), f("digest", T.DIGEST), f("fail_reason", T.STRING));
        reg("util.MergeId", f("initiator", T.ADDR), f("id", T.INT));
        reg("protocols.PingData", f("own_addr", T.ADDR), f("view", T.VIEW), f("view_id", T.VIEWID),
            f("is_server", T.BOOL), f("logical_name", T.STRING), c("physical_addrs", T.ADDRS, ArrayList.class));
        reg("util.Range", f("low", T.LONG), f("high", T.LONG));
        // headers
        reg("protocols.TpHeader", f("channel_name", T.STRING));
        reg("protocols.PingHeader", f("type", T.BYTE), f("data", T.PINGDATA), f("cluster_name", T.STRING), f("view_id", T.VIEWID));
        reg("protocols.pbcast.GMS$GmsHeader", f("type", T.BYTE), f("view", T.VIEW), f("mbr", T.ADDR),
            c("mbrs", T.ADDRS, ArrayList.class), f("join_rsp", T.JOINRSP), f("my_digest", T.DIGEST),
            f("merge_id", T.MERGEID), f("merge_rejected", T.BOOL), f("use_flush_if_present", "useFlushIfPresent", T.BOOL));
        reg("protocols.pbcast.NakAckHeader", f("type", T.BYTE), f("seqno", T.LONG), f("range", T.RANGE), f("sender", T.ADDR));
        reg("protocols.UNICAST$UnicastHeader", f("type", T.BYTE), f("seqno", T.LONG), f("conn_id", T.SHORT), f("first", T.BOOL));
        reg("protocols.UNICAST2$Unicast2Header", f("type", T.BYTE), f("seqno", T.LONG), f("high_seqno", T.LONG),
            f("conn_id", T.SHORT), f("first", T.BOOL));
        reg("protocols.pbcast.STABLE$StableHeader", f("type", T.INT), f("stable_digest", "stableDigest", T.DIGEST));
        reg("protocols.FD$FdHeader", f("type", T.BYTE), c("mbrs", T.ADDRS, Vector.class), f("from", T.ADDR));
        reg("protocols.FD_ALL$HeartbeatHeader");
        reg("protocols.FD_SOCK$FdHeader", f("type", T.BYTE), f("mbr", T.ADDR), f("sock_addr", T.IPADDR),
            f("cached_addrs", "cachedAddrs", T.IPMAP), f("mbrs", T.ADDR_SET));
        reg("protocols.VERIFY_SUSPECT$VerifyHeader", f("type", T.SHORT), f("from", T.ADDR));
        reg("protocols.FragHeader", f("id", T.LONG), f("frag_id", T.INT), f("num_frags", T.INT));
        reg("protocols.FcHeader", f("type", T.BYTE));
        reg("protocols.SFC$Header", f("type", T.BYTE));
        reg("protocols.pbcast.STATE_TRANSFER$StateHeader", f("type", T.BYTE), f("id", T.LONG), f("sender", T.ADDR),
            f("my_digest", T.DIGEST), f("state_id", T.STRING));
        reg("protocols.pbcast.STREAMING_STATE_TRANSFER$StateHeader", f("type", T.BYTE), f("id", T.LONG),
            f("sender", T.ADDR), f("my_digest", T.DIGEST), f("bind_addr", T.IPADDR), f("state_id", T.STRING));
        reg("protocols.pbcast.FLUSH$FlushHeader", f("type", T.BYTE), f("view_id", "viewID", T.LONG),
            c("flush_participants", "flushParticipants", T.ADDRS, ArrayList.class), f("digest", T.DIGEST));
        reg("protocols.SEQUENCER$SequencerHeader", f("type", T.BYTE), f("tag", T.VIEWID));
        reg("protocols.ENCRYPT$EncryptHeader", f("type", T.SHORT), f("version", T.STRING),
            f("encrypt_entire_msg", T.BOOL));
        reg("protocols.COMPRESS$CompressHeader", f("original_size", T.INT));
        reg("protocols.MERGE3$CoordAnnouncement", f("view", T.VIEW));
        reg("protocols.AuthHeader", f("token", T.AUTHTOKEN));
        reg("blocks.RequestCorrelator$Header", REQCORR_F);
        reg("blocks.RequestCorrelator$MultiDestinationHeader",
            cat(REQCORR_F, c("exclusion_list", T.ADDRS, LinkedList.class)));
        // 2.12 headers of protocols outside the jar's stack configs (jgpy decodes them in captures)
        reg("protocols.SMACK$SmackHeader", f("type", T.BYTE), f("seqno", T.LONG));
        reg("protocols.FD_SIMPLE$FdHeader", f("type", T.BYTE));
        reg("protocols.VIEW_SYNC$ViewSyncHeader", f("type", T.INT), f("view", T.VIEW));
        reg("protocols.MERGEFAST$MergefastHeader", f("view", T.VIEW));
        reg("mux.MuxHeader", f("id", T.STRING), f("info", T.SERVICEINFO));
        reg("protocols.SCOPE$ScopeHeader", f("type", T.BYTE), f("scope", T.SHORT));
        reg("blocks.mux.MuxHeader", f("id", T.SHORT));
        reg("protocols.DAISYCHAIN$DaisyHeader", f("ttl", T.SHORT));
        reg("protocols.RELAY$RelayHeader", f("type", T.ENUM), f("original_sender", T.ADDR));
        reg("protocols.STOMP$StompHeader", f("type", T.ENUM), f("headers", T.STRMAP));
        reg("protocols.PrioHeader", f("priority", T.BYTE));
        reg("blocks.PullPushAdapter$PullHeader", f("identifier", T.JOBJECT));
    }

    // ------------------------------------------------------------------ reflection helpers

    private static final Map<String,Field> FIELDS=new ConcurrentHashMap<>();

    static Field field(Class<?> cls, String name) {
        String key=cls.getName() + '#' + name;
        Field f=FIELDS.get(key);
        if(f != null) return f;
        for(Class<?> c=cls; c != null; c=c.getSuperclass()) {
            try {
                f=c.getDeclaredField(name);
                f.setAccessible(true);
                FIELDS.put(key, f);
                return f;
            }
            catch(NoSuchFieldException ignored) {
            }
        }
        throw new IllegalStateException("no field '" + name + "' in " + cls.getName());
    }

    static Object get(Object o, String name) {
        try {
            return field(o.getClass(), name).get(o);
        }
        catch(IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    static void set(Object o, String name, Object val) {
        try {
            field(o.getClass(), name).set(o, val);
        }
        catch(IllegalAccessException e) {
            throw new IllegalStateException(e);
        }
    }

    static <X> X newInstance(Class<X> cls) {
        try {
            Constructor<X> ctor=cls.getDeclaredConstructor();
            ctor.setAccessible(true);
            return ctor.newInstance();
        }
        catch(Exception e) {
            throw new IllegalStateException("cannot instantiate " + cls.getName() + ": " + e, e);
        }
    }

    /** Class key of a JGroups class: its name without the "org.jgroups." prefix. */
    static String key(Class<?> c) {
        String n=c.getName();
        return n.startsWith(PKG) ? n.substring(PKG.length()) : n;
    }

    static String norm(String k) {
        if(k == null) return null;
        return k.startsWith(PKG) ? k.substring(PKG.length()) : k;
    }

    static Class<?> classOf(String key) {
        key=norm(key);
        Kind k=KINDS.get(key);
        if(k != null) return k.cls;
        switch(key) {
            case "stack.IpAddress": return IpAddress.class;
            case "util.Digest": return Digest.class;
            case "util.MutableDigest": return MutableDigest.class;
            case "Message": return Message.class;
        }
        try {
            return Class.forName(PKG + key);
        }
        catch(ClassNotFoundException e) {
            try {
                return Class.forName(key);
            }
            catch(ClassNotFoundException e2) {
                throw new IllegalArgumentException("unknown kind/class '" + key + "'");
            }
        }
    }

    // ------------------------------------------------------------------ JSON scalar conversion

    static BigInteger bigOf(Object v, String what) {
        if(v instanceof Long) return BigInteger.valueOf((Long)v);
        if(v instanceof BigInteger) return (BigInteger)v;
        if(v instanceof Integer || v instanceof Short || v instanceof Byte) return BigInteger.valueOf(((Number)v).longValue());
        throw new IllegalArgumentException(what + ": expected an integer, got " + desc(v));
    }

    static String desc(Object v) {
        return v == null ? "null" : v.getClass().getSimpleName() + " " + Json.write(v);
    }

    /** Integer in [-(2^(bits-1)), 2^bits - 1], wrapped into the signed range (so unsigned spellings are accepted). */
    static long integer(Object v, int bits, String what) {
        BigInteger b=bigOf(v, what);
        BigInteger min=BigInteger.ONE.shiftLeft(bits - 1).negate(), max=BigInteger.ONE.shiftLeft(bits).subtract(BigInteger.ONE);
        if(b.compareTo(min) < 0 || b.compareTo(max) > 0)
            throw new IllegalArgumentException(what + ": " + b + " does not fit in " + bits + " bits");
        return b.longValue(); // two's complement wrap
    }

    static long toLong(Object v, String what)  {return integer(v, 64, what);}
    static int toInt(Object v, String what)    {return (int)integer(v, 32, what);}
    static short toShort(Object v, String what) {return (short)integer(v, 16, what);}
    static byte toByte(Object v, String what)  {return (byte)integer(v, 8, what);}

    static boolean toBool(Object v, String what) {
        if(v instanceof Boolean) return (Boolean)v;
        if(v instanceof Long) return (Long)v != 0;
        throw new IllegalArgumentException(what + ": expected a boolean, got " + desc(v));
    }

    static String toStr(Object v, String what) {
        if(v == null || v instanceof String) return (String)v;
        throw new IllegalArgumentException(what + ": expected a string or null, got " + desc(v));
    }

    static byte[] toBytes(Object v, String what) {
        if(v == null) return null;
        if(v instanceof String) return Json.unhex((String)v);
        throw new IllegalArgumentException(what + ": expected a hex string or null, got " + desc(v));
    }

    static double toDouble(Object v, String what) {
        if(v instanceof Json.Num) return Double.parseDouble(((Json.Num)v).text);
        if(v instanceof Long) return (double)(Long)v;
        if(v instanceof BigInteger) return Double.parseDouble(v.toString());
        if(v instanceof String) return Double.parseDouble((String)v); // "NaN", "Infinity", "-Infinity"
        throw new IllegalArgumentException(what + ": expected a number, got " + desc(v));
    }

    static float toFloat(Object v, String what) {
        if(v instanceof Json.Num) return Float.parseFloat(((Json.Num)v).text);
        if(v instanceof Long || v instanceof BigInteger) return Float.parseFloat(v.toString());
        if(v instanceof String) return Float.parseFloat((String)v);
        throw new IllegalArgumentException(what + ": expected a number, got " + desc(v));
    }

    @SuppressWarnings("unchecked")
    static Map<String,Object> toMap(Object v, String what) {
        if(v instanceof Map) return (Map<String,Object>)v;
        throw new IllegalArgumentException(what + ": expected an object, got " + desc(v));
    }

    @SuppressWarnings("unchecked")
    static List<Object> toList(Object v, String what) {
        if(v instanceof List) return (List<Object>)v;
        throw new IllegalArgumentException(what + ": expected an array, got " + desc(v));
    }

    // ------------------------------------------------------------------ JSON -> Java

    /** Builds an object from a JSON value with a "class" key (defaultKey is used when "class" is missing). */
    static Object build(Object json, String defaultKey) throws Exception {
        if(json == null) return null;
        Map<String,Object> v=toMap(json, defaultKey != null ? defaultKey : "value");
        String key=v.containsKey("class") ? norm(toStr(v.get("class"), "class")) : defaultKey;
        if(key == null)
            throw new IllegalArgumentException("object without \"class\": " + Json.write(v));
        switch(key) {
            case "stack.IpAddress":    return buildIp(v);
            case "util.Digest":        return buildDigest(v, false);
            case "util.MutableDigest": return buildDigest(v, true);
            case "Message":            return buildMessage(v);
        }
        Kind k=KINDS.get(key);
        if(k == null)
            return buildFromBody(key, v);
        Object o=newInstance(k.cls);
        checkKeys(v, k.fields, key);
        for(F fld: k.fields) {
            if(!v.containsKey(fld.json))
                continue;
            Object val=fld.t == T.ENUM ? enumOf(field(k.cls, fld.java).getType(), v.get(fld.json), key + "." + fld.json)
              : toJava(v.get(fld.json), fld, key);
            set(o, fld.java, val);
        }
        if(o instanceof org.jgroups.protocols.TpHeader) { // keep its cached size() consistent, like its constructor does
            String n=((org.jgroups.protocols.TpHeader)o).channel_name;
            set(o, "size", n != null ? n.length() + 2 : 0);
        }
        return o;
    }

    static void checkKeys(Map<String,Object> v, F[] fields, String key) {
        outer:
        for(String k: v.keySet()) {
            if(k.equals("class")) continue;
            for(F fld: fields)
                if(fld.json.equals(k)) continue outer;
            throw new IllegalArgumentException("unknown field '" + k + "' for " + key);
        }
    }

    /** The constant of enum class {@code cls} with ordinal {@code j} (null for null). */
    static Object enumOf(Class<?> cls, Object j, String what) {
        if(j == null) return null;
        Object[] all=cls.getEnumConstants();
        int i=toInt(j, what);
        if(all == null || i < 0 || i >= all.length)
            throw new IllegalArgumentException(what + ": no constant with ordinal " + i + " in " + cls.getName());
        return all[i];
    }

    /** Fallback for Streamable classes without a field table: {"class": K, "body": hex of writeTo}. */
    static Object buildFromBody(String key, Map<String,Object> v) throws Exception {
        Class<?> cls=classOf(key);
        if(!v.containsKey("body"))
            throw new IllegalArgumentException("kind '" + key + "' has no field table; give its serialized body as \"body\" (hex)");
        Object o=newInstance(cls);
        byte[] body=toBytes(v.get("body"), key + ".body");
        ((Streamable)o).readFrom(new DataInputStream(new ByteArrayInputStream(body)));
        return o;
    }

    static Object toJava(Object j, F fld, String owner) throws Exception {
        String what=owner + "." + fld.json;
        switch(fld.t) {
            case BYTE:   return toByte(j, what);
            case SHORT:  return toShort(j, what);
            case INT:    return toInt(j, what);
            case LONG:   return toLong(j, what);
            case BOOL:   return toBool(j, what);
            case STRING: return toStr(j, what);
            case HEX:    return toBytes(j, what);
            case ADDR:   return buildAddress(j);
            case IPADDR: return build(j, "stack.IpAddress");
            case VIEW:   return build(j, "View");
            case VIEWID: return build(j, "ViewId");
            case DIGEST: return build(j, "util.Digest");
            case JOINRSP: return build(j, "protocols.pbcast.JoinRsp");
            case MERGEID: return build(j, "util.MergeId");
            case PINGDATA: return build(j, "protocols.PingData");
            case RANGE:  return build(j, "util.Range");
            case ADDRS: {
                if(j == null) return null;
                @SuppressWarnings("unchecked")
                Collection<Object> col=(Collection<Object>)fld.coll.getDeclaredConstructor().newInstance();
                for(Object a: toList(j, what)) col.add(buildAddress(a));
                return col;
            }
            case ADDR_SET: {
                if(j == null) return null;
                Set<Address> s=new LinkedHashSet<>();   // keep the given order: it is what gets written
                for(Object a: toList(j, what)) s.add(buildAddress(a));
                return s;
            }
            case IPMAP: {
                if(j == null) return null;
                Map<Address,IpAddress> m=new LinkedHashMap<>();   // keep the given order
                for(Object e: toList(j, what)) {
                    List<Object> pair=toList(e, what + "[]");
                    if(pair.size() != 2) throw new IllegalArgumentException(what + ": entries are [Address, IpAddress]");
                    m.put(buildAddress(pair.get(0)), (IpAddress)build(pair.get(1), "stack.IpAddress"));
                }
                return m;
            }
            case VIEWS: {
                if(j == null) return null;
                Vector<View> vs=new Vector<>();
                for(Object e: toList(j, what)) vs.add((View)build(e, "View"));
                return vs;
            }
            case PAYLOAD: {
                byte[] b=toBytes(j, what);
                return b == null ? null : Util.objectFromByteBuffer(b);
            }
            case AUTHTOKEN: return buildAuthToken(j, what);
            case JOBJECT: return j == null ? null : buildJavaObject(j);
            case STRMAP: {   // null: empty (StompHeader's map is never null; jgpy reads an empty one as None)
                Map<String,String> m=new HashMap<>();
                for(Object e: j == null ? List.of() : toList(j, what)) {
                    List<Object> pair=toList(e, what + "[]");
                    if(pair.size() != 2) throw new IllegalArgumentException(what + ": entries are [key, value]");
                    m.put(toStr(pair.get(0), what + "[0]"), toStr(pair.get(1), what + "[1]"));
                }
                return m;
            }
            case SERVICEINFO: {
                if(j == null) return null;
                List<Object> l=toList(j, what);
                if(l.size() != 4) throw new IllegalArgumentException(what + ": [type, service, host, state]");
                return new org.jgroups.mux.ServiceInfo(toByte(l.get(0), what + "[0]"), toStr(l.get(1), what + "[1]"),
                                                       buildAddress(l.get(2)), toBytes(l.get(3), what + "[3]"));
            }
            case ENUM: throw new IllegalStateException(what + ": an enum is built from its field's type");
        }
        throw new IllegalStateException("type " + fld.t);
    }

    /** An AuthToken from [class name, body]: the body is auth_value (Simple/MD5), token (FixedMembership), the
     *  encrypted token in hex (X509) or null (RegexMembership); a class Java does not know gives no token. */
    static Object buildAuthToken(Object j, String what) throws Exception {
        if(j == null) return null;
        List<Object> pair=toList(j, what);
        if(pair.size() != 2) throw new IllegalArgumentException(what + ": [class name, body]");
        String name=toStr(pair.get(0), what + "[0]");
        Object body=pair.get(1);
        Class<?> cls;
        try {
            cls=Class.forName(name);
        }
        catch(ClassNotFoundException e) {
            return null;
        }
        Object token=newInstance(cls);
        if(token instanceof org.jgroups.auth.X509Token) {
            set(token, "encryptedToken", toBytes(body, what + "[1]"));
            set(token, "valueSet", true);
        }
        else if(token instanceof org.jgroups.auth.FixedMembershipToken)
            set(token, "token", toStr(body, what + "[1]"));
        else if(token instanceof org.jgroups.auth.SimpleToken || token instanceof org.jgroups.auth.MD5Token)
            set(token, "auth_value", toStr(body, what + "[1]"));
        return token;
    }

    static Object authTokenJson(Object t) {
        String name=((org.jgroups.auth.AuthToken)t).getName();
        Object body=null;
        if(t instanceof org.jgroups.auth.X509Token) {
            byte[] b=(byte[])get(t, "encryptedToken");
            body=b == null ? null : Json.hex(b);
        }
        else if(t instanceof org.jgroups.auth.FixedMembershipToken)
            body=get(t, "token");
        else if(t instanceof org.jgroups.auth.SimpleToken || t instanceof org.jgroups.auth.MD5Token)
            body=get(t, "auth_value");
        return java.util.Arrays.asList(name, body);
    }

    static Address buildAddress(Object j) throws Exception {
        if(j == null) return null;
        Object o=build(j, null);
        if(!(o instanceof Address))
            throw new IllegalArgumentException("not an Address: " + Json.write(j));
        return (Address)o;
    }

    static IpAddress buildIp(Map<String,Object> v) throws Exception {
        checkKeys(v, new F[]{f("host", T.STRING), f("scope_id", T.INT), f("port", T.INT), f("additional_data", T.HEX)}, "stack.IpAddress");
        int port=v.containsKey("port") ? toInt(v.get("port"), "stack.IpAddress.port") : 0;
        if(port < 0 || port > 65535) throw new IllegalArgumentException("stack.IpAddress.port: " + port + " not in 0..65535");
        IpAddress ip=new IpAddress(port, false); // ip_addr stays null, no local-host lookup
        String host=toStr(v.get("host"), "stack.IpAddress.host");
        Object scope=v.get("scope_id");
        if(host != null)
            set(ip, "ip_addr", parseHost(host, scope == null ? null : toInt(scope, "stack.IpAddress.scope_id")));
        else if(scope != null)
            throw new IllegalArgumentException("stack.IpAddress: scope_id without host");
        set(ip, "additional_data", toBytes(v.get("additional_data"), "stack.IpAddress.additional_data"));
        set(ip, "size", -1);
        return ip;
    }

    /** Parses a numeric IPv4/IPv6 literal without any DNS lookup. */
    static InetAddress parseHost(String host, Integer scope) throws Exception {
        String h=host;
        if(h.startsWith("[") && h.endsWith("]")) h=h.substring(1, h.length() - 1);
        int pct=h.indexOf('%');
        if(pct >= 0) {
            String sc=h.substring(pct + 1);
            h=h.substring(0, pct);
            if(scope == null) scope=Integer.parseInt(sc);
        }
        if(h.indexOf(':') >= 0)
            return Inet6Address.getByAddress(null, parseIPv6(h), scope == null ? -1 : scope);
        if(scope != null) throw new IllegalArgumentException("scope_id given for IPv4 host " + host);
        return InetAddress.getByAddress(parseIPv4(h));
    }

    static byte[] parseIPv4(String s) {
        String[] p=s.split("\\.", -1);
        if(p.length != 4) throw new IllegalArgumentException("not a dotted IPv4 address: '" + s + "'");
        byte[] b=new byte[4];
        for(int i=0; i < 4; i++) {
            if(p[i].isEmpty() || p[i].length() > 3 || !p[i].chars().allMatch(Character::isDigit))
                throw new IllegalArgumentException("not a dotted IPv4 address: '" + s + "'");
            int x=Integer.parseInt(p[i]);
            if(x > 255) throw new IllegalArgumentException("not a dotted IPv4 address: '" + s + "'");
            b[i]=(byte)x;
        }
        return b;
    }

    static byte[] parseIPv6(String s) {
        int dbl=s.indexOf("::");
        if(dbl >= 0 && s.indexOf("::", dbl + 1) >= 0) throw new IllegalArgumentException("bad IPv6 address '" + s + "'");
        List<Integer> head=new ArrayList<>(), tail=new ArrayList<>();
        if(dbl >= 0) {
            groups(s.substring(0, dbl), head, false, s);
            groups(s.substring(dbl + 2), tail, true, s);
        }
        else
            groups(s, head, true, s);
        int n=head.size() + tail.size();
        if(dbl >= 0 ? n > 7 : n != 8) throw new IllegalArgumentException("bad IPv6 address '" + s + "'");
        byte[] b=new byte[16];
        int i=0;
        for(int g: head) {b[i++]=(byte)(g >> 8); b[i++]=(byte)g;}
        i=16 - 2 * tail.size();
        for(int g: tail) {b[i++]=(byte)(g >> 8); b[i++]=(byte)g;}
        return b;
    }

    private static void groups(String part, List<Integer> out, boolean last, String all) {
        if(part.isEmpty()) return;
        String[] gs=part.split(":", -1);
        for(int i=0; i < gs.length; i++) {
            String g=gs[i];
            if(last && i == gs.length - 1 && g.indexOf('.') >= 0) {
                byte[] v4=parseIPv4(g);
                out.add(((v4[0] & 0xff) << 8) | (v4[1] & 0xff));
                out.add(((v4[2] & 0xff) << 8) | (v4[3] & 0xff));
                continue;
            }
            if(g.isEmpty() || g.length() > 4) throw new IllegalArgumentException("bad IPv6 address '" + all + "'");
            out.add(Integer.parseInt(g, 16));
        }
    }

    static Digest buildDigest(Map<String,Object> v, boolean mutable) throws Exception {
        String key=mutable ? "util.MutableDigest" : "util.Digest";
        checkKeys(v, new F[]{f("entries", T.STRING)}, key);
        Map<Address,Digest.Entry> m=new LinkedHashMap<>();
        Object entries=v.get("entries");
        if(entries != null) {
            for(Object e: toList(entries, key + ".entries")) {
                List<Object> t=toList(e, key + ".entries[]");
                if(t.size() != 4)
                    throw new IllegalArgumentException(key + ": entries are [Address, low, highest_delivered, highest_received]");
                m.put(buildAddress(t.get(0)), new Digest.Entry(toLong(t.get(1), "low"), toLong(t.get(2), "highest_delivered"),
                                                                toLong(t.get(3), "highest_received")));
            }
        }
        return mutable ? new MutableDigest(m) : new Digest(m);
    }

    static Message buildMessage(Map<String,Object> v) throws Exception {
        checkKeys(v, new F[]{f("dest", T.ADDR), f("src", T.ADDR), f("flags", T.INT), f("buf", T.HEX), f("headers", T.STRING)}, "Message");
        Message msg=new Message(true);
        msg.setDest(buildAddress(v.get("dest")));
        msg.setSrc(buildAddress(v.get("src")));
        if(v.get("flags") != null)
            set(msg, "flags", toByte(v.get("flags"), "Message.flags"));
        byte[] buf=toBytes(v.get("buf"), "Message.buf");
        if(buf != null) msg.setBuffer(buf);
        Object hs=v.get("headers");
        if(hs != null) {
            for(Object e: toList(hs, "Message.headers")) {
                List<Object> pair=toList(e, "Message.headers[]");
                if(pair.size() != 2)
                    throw new IllegalArgumentException("Message.headers: entries are [protocol id, Header]");
                Object h=build(pair.get(1), null);
                if(!(h instanceof Header))
                    throw new IllegalArgumentException("Message.headers: not a Header: " + Json.write(pair.get(1)));
                msg.putHeader(toShort(pair.get(0), "Message.headers[].id"), (Header)h);
            }
        }
        return msg;
    }

    // ------------------------------------------------------------------ Java -> JSON

    static Object toJson(Object o) throws Exception {
        if(o == null) return null;
        Class<?> cls=o.getClass();
        if(cls == IpAddress.class) return ipJson((IpAddress)o);
        if(o instanceof Digest) return digestJson((Digest)o);
        if(cls == Message.class) return messageJson((Message)o);
        Kind k=BY_CLASS.get(cls);
        if(k == null) {
            Map<String,Object> m=Json.obj("class", key(cls));
            if(o instanceof Streamable) {
                ByteArrayOutputStream bos=new ByteArrayOutputStream();
                DataOutputStream dos=new DataOutputStream(bos);
                ((Streamable)o).writeTo(dos);
                dos.flush();
                m.put("body", Json.hex(bos.toByteArray()));
            }
            m.put("string", String.valueOf(o));
            return m;
        }
        Map<String,Object> m=Json.obj("class", k.key);
        for(F fld: k.fields)
            m.put(fld.json, fieldJson(get(o, fld.java), fld));
        return m;
    }

    @SuppressWarnings("unchecked")
    static Object fieldJson(Object v, F fld) throws Exception {
        if(v == null) return null;
        switch(fld.t) {
            case BYTE: return (int)(Byte)v;
            case SHORT: return (int)(Short)v;
            case INT: case LONG: case BOOL: case STRING: return v;
            case HEX: return Json.hex((byte[])v);
            case ADDRS: case ADDR_SET: case VIEWS: {
                List<Object> l=new ArrayList<>();
                for(Object a: (Collection<Object>)v) l.add(toJson(a));
                return l;
            }
            case IPMAP: {
                List<Object> l=new ArrayList<>();
                for(Map.Entry<Object,Object> e: ((Map<Object,Object>)v).entrySet())
                    l.add(List.of(nullSafe(toJson(e.getKey())), nullSafe(toJson(e.getValue()))));
                return l;
            }
            case PAYLOAD: return Json.hex(Util.objectToByteBuffer(v));
            case AUTHTOKEN: return authTokenJson(v);
            case JOBJECT: return javaObjectJson(v);
            case ENUM: return ((Enum<?>)v).ordinal();
            case SERVICEINFO: {
                byte[] state=(byte[])get(v, "state");
                return java.util.Arrays.asList((int)(Byte)get(v, "type"), get(v, "service"), toJson(get(v, "host")),
                                               state == null ? null : Json.hex(state));
            }
            case STRMAP: {   // empty: null, as jgpy reads it (a count of 0)
                if(((Map<?,?>)v).isEmpty()) return null;
                List<Object> l=new ArrayList<>();
                for(Map.Entry<Object,Object> e: ((Map<Object,Object>)v).entrySet())
                    l.add(java.util.Arrays.asList(e.getKey(), e.getValue()));
                return l;
            }
            default: return toJson(v);
        }
    }

    private static final Object JSON_NULL=new Json.Raw("null");
    private static Object nullSafe(Object o) {return o == null ? JSON_NULL : o;} // List.of() refuses nulls

    static Map<String,Object> ipJson(IpAddress ip) {
        InetAddress a=ip.getIpAddress();
        String host=null;
        Object scope=null;
        if(a != null) {
            host=a.getHostAddress();
            int pct=host.indexOf('%');
            if(pct >= 0) host=host.substring(0, pct);
            if(a instanceof Inet6Address) scope=((Inet6Address)a).getScopeId();
        }
        return Json.obj("class", "stack.IpAddress", "host", host, "scope_id", scope, "port", ip.getPort(),
                        "additional_data", Json.hex(ip.getAdditionalData()));
    }

    static Map<String,Object> digestJson(Digest d) throws Exception {
        List<Object> entries=new ArrayList<>();
        for(Map.Entry<Address,Digest.Entry> e: d.getSenders().entrySet()) {
            Digest.Entry en=e.getValue();
            List<Object> t=new ArrayList<>(4);
            t.add(toJson(e.getKey()));
            t.add(en.getLow());
            t.add(en.getHighestDeliveredSeqno());
            t.add(en.getHighestReceivedSeqno());
            entries.add(t);
        }
        return Json.obj("class", key(d.getClass()), "entries", entries);
    }

    static Map<String,Object> messageJson(Message msg) throws Exception {
        byte[] raw=msg.getRawBuffer();
        return Json.obj("class", "Message",
                        "dest", toJson(msg.getDest()),
                        "src", toJson(msg.getSrc()),
                        "flags", msg.getFlags() & 0xff,
                        "buf", raw == null ? null : Json.hex(raw, msg.getOffset(), msg.getLength()),
                        "headers", headersJson(msg, false));
    }

    /** The message's headers in their internal (= wire) order: [[id, Header JSON]] or, brief, [[id, class key, toString]]. */
    static List<Object> headersJson(Message msg, boolean brief) throws Exception {
        Headers h=(Headers)get(msg, "headers");
        List<Object> l=new ArrayList<>();
        if(h == null) return l;
        short[] ids=h.getRawIDs();
        Header[] hdrs=h.getRawHeaders();
        for(int i=0; i < ids.length; i++) {
            if(ids[i] == 0 && hdrs[i] == null) continue;
            List<Object> e=new ArrayList<>(3);
            e.add((int)ids[i]);
            if(brief) {
                e.add(hdrs[i] == null ? null : key(hdrs[i].getClass()));
                e.add(String.valueOf(hdrs[i]));
            }
            else
                e.add(toJson(hdrs[i]));
            l.add(e);
        }
        return l;
    }

    // ------------------------------------------------------------------ JavaObject (Util.objectToByteBuffer)

    static Object buildJavaObject(Object json) throws Exception {
        Map<String,Object> v=toMap(json, "JavaObject");
        checkKeys(v, new F[]{f("type", T.STRING), f("value", T.STRING)}, "JavaObject");
        Object t=v.get("type");
        String type=t == null ? "null" : toStr(t, "JavaObject.type");
        Object val=v.get("value");
        switch(type) {
            case "null":      return null;
            case "Boolean":   return toBool(val, "JavaObject.value");
            case "Byte":      return toByte(val, "JavaObject.value");
            case "Character": {
                String s=toStr(val, "JavaObject.value");
                if(s == null || s.length() != 1)
                    throw new IllegalArgumentException("JavaObject Character: value must be a 1-char string");
                return s.charAt(0);
            }
            case "Short":     return toShort(val, "JavaObject.value");
            case "Integer":   return toInt(val, "JavaObject.value");
            case "Long":      return toLong(val, "JavaObject.value");
            case "Float":     return toFloat(val, "JavaObject.value");
            case "Double":    return toDouble(val, "JavaObject.value");
            case "String":    return toStr(val, "JavaObject.value");
            case "byte[]":    return toBytes(val, "JavaObject.value");
            case "Serializable": {
                byte[] b=toBytes(val, "JavaObject.value");
                try(ObjectInputStream in=new ObjectInputStream(new ByteArrayInputStream(b))) {
                    return in.readObject();
                }
            }
            case "Streamable": {
                Object o=build(val, null);
                if(!(o instanceof Streamable))
                    throw new IllegalArgumentException("JavaObject Streamable: " + key(o.getClass()) + " is not Streamable");
                return o;
            }
        }
        throw new IllegalArgumentException("JavaObject: unknown type '" + type + "'");
    }

    /** Classifies an object the way Util.objectToByteBuffer does (null, Streamable, exact primitive class, Serializable). */
    static Map<String,Object> javaObjectJson(Object o) throws Exception {
        String type;
        Object val;
        if(o == null) {type="null"; val=null;}
        else if(o instanceof Streamable) {type="Streamable"; val=toJson(o);}
        else if(o.getClass() == Boolean.class) {type="Boolean"; val=o;}
        else if(o.getClass() == Byte.class) {type="Byte"; val=(int)(Byte)o;}
        else if(o.getClass() == Character.class) {type="Character"; val=String.valueOf((char)(Character)o);}
        else if(o.getClass() == Short.class) {type="Short"; val=(int)(Short)o;}
        else if(o.getClass() == Integer.class) {type="Integer"; val=o;}
        else if(o.getClass() == Long.class) {type="Long"; val=o;}
        else if(o.getClass() == Float.class) {type="Float"; val=o;}
        else if(o.getClass() == Double.class) {type="Double"; val=o;}
        else if(o.getClass() == String.class) {type="String"; val=o;}
        else if(o.getClass() == byte[].class) {type="byte[]"; val=Json.hex((byte[])o);}
        else {
            type="Serializable";
            byte[] b=Util.objectToByteBuffer(o);
            val=Json.hex(b, 1, b.length - 1);
        }
        return Json.obj("class", "JavaObject", "type", type, "value", val);
    }

    // ------------------------------------------------------------------ TP access (protected static methods)

    static final MethodHandle TP_WRITE_MESSAGE, TP_WRITE_MESSAGE_LIST, TP_READ_MESSAGE_LIST;
    static {
        try {
            Class<?> tp=org.jgroups.protocols.TP.class;
            Method wm=tp.getDeclaredMethod("writeMessage", Message.class, DataOutputStream.class, boolean.class);
            Method wl=tp.getDeclaredMethod("writeMessageList", Address.class, Address.class, List.class, DataOutputStream.class, boolean.class);
            Method rl=tp.getDeclaredMethod("readMessageList", DataInputStream.class);
            wm.setAccessible(true); wl.setAccessible(true); rl.setAccessible(true);
            MethodHandles.Lookup lk=MethodHandles.lookup();
            TP_WRITE_MESSAGE=lk.unreflect(wm);
            TP_WRITE_MESSAGE_LIST=lk.unreflect(wl);
            TP_READ_MESSAGE_LIST=lk.unreflect(rl);
        }
        catch(Exception e) {
            throw new ExceptionInInitializerError(e);
        }
    }

    static void writeMessage(Message msg, DataOutputStream dos, boolean multicast) throws Exception {
        try {
            TP_WRITE_MESSAGE.invokeExact(msg, dos, multicast);
        }
        catch(Exception | Error e) {throw e;}
        catch(Throwable t) {throw new RuntimeException(t);}
    }

    static void writeMessageList(Address dest, Address src, List<Message> msgs, DataOutputStream dos, boolean multicast) throws Exception {
        try {
            TP_WRITE_MESSAGE_LIST.invokeExact(dest, src, msgs, dos, multicast);
        }
        catch(Exception | Error e) {throw e;}
        catch(Throwable t) {throw new RuntimeException(t);}
    }

    @SuppressWarnings("unchecked")
    static List<Message> readMessageList(DataInputStream in) throws Exception {
        try {
            return (List<Message>)TP_READ_MESSAGE_LIST.invokeExact(in);
        }
        catch(Exception | Error e) {throw e;}
        catch(Throwable t) {throw new RuntimeException(t);}
    }

    // ------------------------------------------------------------------ encode / decode commands

    interface Writer {void write(DataOutputStream out) throws Exception;}

    static byte[] bytes(Writer w) throws Exception {
        ByteArrayOutputStream bos=new ByteArrayOutputStream(256);
        DataOutputStream dos=new DataOutputStream(bos);
        w.write(dos);
        dos.flush();
        return bos.toByteArray();
    }

    static byte[] encode(String kind, Object value) throws Exception {
        kind=norm(kind);
        switch(kind) {
            case "Address": {
                Address a=buildAddress(value);
                return bytes(out -> Util.writeAddress(a, out));
            }
            case "Addresses": {
                List<Address> l=addressList(value);
                return bytes(out -> Util.writeAddresses(l, out));
            }
            case "JavaObject":
                return Util.objectToByteBuffer(buildJavaObject(value));
            case "Datagram":
                return encodeDatagram(toMap(value, "Datagram"));
        }
        Object o=build(value, kind);
        if(!(o instanceof Streamable))
            throw new IllegalArgumentException(kind + " is not Streamable");
        return bytes(((Streamable)o)::writeTo);
    }

    static List<Address> addressList(Object value) throws Exception {
        if(value == null) return null;
        List<Address> l=new ArrayList<>();
        for(Object a: toList(value, "Addresses")) l.add(buildAddress(a));
        return l;
    }

    static byte[] encodeDatagram(Map<String,Object> v) throws Exception {
        checkKeys(v, new F[]{f("list", T.BOOL), f("multicast", T.BOOL), f("dest", T.ADDR), f("src", T.ADDR),
          f("messages", T.STRING), f("version", T.SHORT), f("tp_flags", T.BYTE)}, "Datagram");
        boolean list=v.get("list") != null && toBool(v.get("list"), "Datagram.list");
        boolean multicast=v.get("multicast") != null && toBool(v.get("multicast"), "Datagram.multicast");
        List<Message> msgs=new ArrayList<>();
        Object ms=v.get("messages");
        if(ms != null)
            for(Object m: toList(ms, "Datagram.messages")) msgs.add((Message)build(m, "Message"));
        if(!list) {
            if(msgs.size() != 1)
                throw new IllegalArgumentException("Datagram: a single (list=false) datagram needs exactly one message, got " + msgs.size());
            Message m=msgs.get(0);
            return bytes(out -> writeMessage(m, out, multicast));
        }
        Address dest=buildAddress(v.get("dest")), src=buildAddress(v.get("src"));
        return bytes(out -> writeMessageList(dest, src, msgs, out, multicast));
    }

    /** Result of a decode: value, re-encoding, consumed, remaining. */
    static Map<String,Object> decode(String kind, byte[] data) throws Exception {
        kind=norm(kind);
        ByteArrayInputStream bin=new ByteArrayInputStream(data);
        DataInputStream in=new DataInputStream(bin);
        Object value;
        byte[] re;
        int consumed;
        switch(kind) {
            case "Address": {
                Address a=Util.readAddress(in);
                value=toJson(a);
                re=bytes(out -> Util.writeAddress(a, out));
                consumed=data.length - bin.available();
                break;
            }
            case "Addresses": {
                @SuppressWarnings("unchecked")
                Collection<Address> c=(Collection<Address>)Util.readAddresses(in, Vector.class);
                value=c == null ? null : fieldJson(c, c("x", T.ADDRS, Vector.class));
                re=bytes(out -> Util.writeAddresses(c, out));
                consumed=data.length - bin.available();
                break;
            }
            case "JavaObject": {
                Object o=Util.objectFromByteBuffer(data);
                value=javaObjectJson(o);
                re=Util.objectToByteBuffer(o);
                consumed=javaObjectConsumed(data);
                break;
            }
            case "Datagram": {
                Object[] r=decodeDatagram(data, bin, in);
                value=r[0];
                re=(byte[])r[1];
                consumed=data.length - bin.available();
                break;
            }
            default: {
                Class<?> cls=classOf(kind);
                Object o=cls == Message.class ? new Message(false) : newInstance(cls);
                if(!(o instanceof Streamable))
                    throw new IllegalArgumentException(kind + " is not Streamable");
                ((Streamable)o).readFrom(in);
                value=toJson(o);
                re=bytes(((Streamable)o)::writeTo);
                consumed=data.length - bin.available();
            }
        }
        return Json.obj("value", value, "hex", Json.hex(re), "consumed", consumed, "remaining", data.length - consumed);
    }

    interface Encoding {byte[] get() throws Exception;}

    /** A re-encoding, or null where the Java classes cannot write what they read: an AuthHeader naming a class
     *  Java does not find has no token, and AuthHeader.writeTo throws on that (a member never re-sends one). */
    static byte[] reencoded(Encoding e) throws Exception {
        try {
            return e.get();
        }
        catch(NullPointerException npe) {
            return null;
        }
    }

    static Object[] decodeDatagram(byte[] data, ByteArrayInputStream bin, DataInputStream in) throws Exception {
        short version=in.readShort();
        byte flags=in.readByte();
        boolean list=(flags & TP_LIST) != 0, multicast=(flags & TP_MULTICAST) != 0;
        Map<String,Object> v=Json.obj("class", "Datagram", "list", list, "multicast", multicast);
        byte[] re;
        if(list) {
            // the list's own dest/src, read by the Java classes from a second stream (readMessageList does not return them)
            DataInputStream peek=new DataInputStream(new ByteArrayInputStream(data, 3, data.length - 3));
            Address dest=Util.readAddress(peek), src=Util.readAddress(peek);
            List<Message> msgs=readMessageList(in);
            v.put("dest", toJson(dest));
            v.put("src", toJson(src));
            List<Object> ml=new ArrayList<>();
            for(Message m: msgs) ml.add(toJson(m));
            v.put("messages", ml);
            re=reencoded(() -> bytes(out -> writeMessageList(dest, src, msgs, out, multicast)));
        }
        else {
            Message m=new Message(false);
            m.readFrom(in);
            v.put("dest", null);
            v.put("src", null);
            List<Object> ml=new ArrayList<>();
            ml.add(toJson(m));
            v.put("messages", ml);
            re=reencoded(() -> bytes(out -> writeMessage(m, out, multicast)));
        }
        v.put("version", (int)version);
        v.put("tp_flags", flags & 0xff);
        return new Object[]{v, re};
    }

    /** How many bytes Util.objectFromByteBuffer really looked at (it is always handed the whole buffer). */
    static int javaObjectConsumed(byte[] data) throws Exception {
        switch(data[0]) {
            case 0:  return 1;                       // TYPE_NULL
            case 10: case 11: return 2;              // Boolean, Byte
            case 12: case 17: return 3;              // Character, Short
            case 14: case 15: return 5;              // Float, Integer
            case 13: case 16: return 9;              // Double, Long
            case 1: {                                // Streamable: count what readGenericStreamable reads
                ByteArrayInputStream bin=new ByteArrayInputStream(data, 1, data.length - 1);
                Util.readGenericStreamable(new DataInputStream(bin));
                return data.length - bin.available();
            }
            case 2: {                                // Serializable: what ObjectInputStream read
                ByteArrayInputStream bin=new ByteArrayInputStream(data, 1, data.length - 1);
                try(ObjectInputStream ois=new ObjectInputStream(bin)) {
                    ois.readObject();
                    return data.length - bin.available();
                }
            }
            default: return data.length;             // String, byte[]: the rest of the buffer
        }
    }

    /** Magic number of a class, via ClassConfigurator (-1 if none). */
    static short magic(Class<?> c) {return ClassConfigurator.getMagicNumber(c);}
}

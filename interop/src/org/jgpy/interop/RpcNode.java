package org.jgpy.interop;

import org.jgroups.Address;
import org.jgroups.JChannel;
import org.jgroups.ReceiverAdapter;
import org.jgroups.View;
import org.jgroups.blocks.MethodCall;
import org.jgroups.blocks.MethodLookup;
import org.jgroups.blocks.Request;
import org.jgroups.blocks.RequestOptions;
import org.jgroups.blocks.RpcDispatcher;
import org.jgroups.util.Rsp;
import org.jgroups.util.RspList;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;

/**
 * A JGroups 2.12.2 member with an {@link RpcDispatcher} over a {@link TypedServer}, driven by JSON lines (the
 * jgpy side is {@code jgpy/testing/rpcnode.py}; tests {@code tests/test_rpc_interop.py}, bench
 * {@code benchmarks/rpc.py}).
 *
 * <pre>java -cp interop/build/classes:/usr/share/java/jgroups.jar org.jgpy.interop.RpcNode</pre>
 *
 * Commands ({@code {"cmd": ..., "id": n, ...}}, each answered by {@code {"reply": n, "ok": true, ...}} on its
 * own thread, so a long call does not hold up the others):
 * <ul>
 *  <li>{@code connect {config, cluster, name}} (system properties come from -D options);</li>
 *  <li>{@code call {dests: [names] | null, method, args: [[type, value]...], mode: OLD|TYPES|SIGNATURE|METHOD|ID,
 *      method_id, rsp: GET_ALL|GET_FIRST|GET_MAJORITY|GET_NONE, timeout_ms, oob}}: callRemoteMethods; the reply's
 *      {@code results} list one entry per member: name, received, suspected, and {@code value} described as
 *      {@link SerGolden#describe} does;</li>
 *  <li>{@code bench {dests, count, size, warmup, async, rsp, anycast}}: {@code count} calls of {@code echoBytes(byte[size])}
 *      (sync: one at a time, the reply gives each round trip in ns; async: all with futures, then waits);</li>
 *  <li>{@code served}: how many calls the server ran; {@code exit}.</li>
 * </ul>
 * Argument types: int, long, short, byte, float, double, boolean, char, String, bytes (hex), null, list, map
 * (a JSON object of String keys), Integer (boxed int).
 */
public final class RpcNode {
    private JChannel ch;
    private RpcDispatcher disp;
    static final AtomicLong served=new AtomicLong();

    /** The methods jgpy calls. */
    public static class TypedServer {
        public int add(int a, int b) {served.incrementAndGet(); return a + b;}
        public long addLong(long a, long b) {served.incrementAndGet(); return a + b;}
        public Integer addBoxed(Integer a, Integer b) {served.incrementAndGet(); return a + b;}
        public String echo(String s) {served.incrementAndGet(); return s;}
        public float half(float f) {served.incrementAndGet(); return f / 2;}
        public double twice(double d) {served.incrementAndGet(); return d * 2;}
        public boolean not(boolean b) {served.incrementAndGet(); return !b;}
        public short negShort(short s) {served.incrementAndGet(); return (short)-s;}
        public byte incByte(byte b) {served.incrementAndGet(); return (byte)(b + 1);}
        public char upper(char c) {served.incrementAndGet(); return Character.toUpperCase(c);}
        public byte[] reverse(byte[] b) {
            served.incrementAndGet();
            byte[] r=new byte[b.length];
            for(int i=0; i < b.length; i++) r[i]=b[b.length - 1 - i];
            return r;
        }
        public byte[] echoBytes(byte[] b) {served.incrementAndGet(); return b;}
        public List<Object> listOf(Object a, Object b) {served.incrementAndGet(); return new ArrayList<Object>(Arrays.asList(a, b));}
        public Map<String,Object> mapOf(String k, Object v) {
            served.incrementAndGet();
            Map<String,Object> m=new HashMap<>();
            m.put(k, v);
            return m;
        }
        public String describe(Object o) throws Exception {served.incrementAndGet(); return SerGolden.describe(o);}
        public String describe2(Object a, Object b) throws Exception {
            served.incrementAndGet();
            return SerGolden.describe(a) + "|" + SerGolden.describe(b);
        }
        public int[] ints(int n) {served.incrementAndGet(); int[] r=new int[n]; for(int i=0; i < n; i++) r[i]=i; return r;}
        public void fail(String msg) {
            served.incrementAndGet();
            throw new IllegalStateException(msg, new IllegalArgumentException("the cause"));
        }
        public Object unserializable() {served.incrementAndGet(); return new Object();}
        public long sleep(long ms) throws InterruptedException {served.incrementAndGet(); Thread.sleep(ms); return ms;}
        public void nothing() {served.incrementAndGet();}
        public String name() {served.incrementAndGet(); return String.valueOf(INSTANCE_NAME);}
    }

    static volatile String INSTANCE_NAME;

    static final Map<Short,Method> IDS=new HashMap<>();
    static {
        try {
            IDS.put((short)1, TypedServer.class.getMethod("add", int.class, int.class));
            IDS.put((short)2, TypedServer.class.getMethod("echo", String.class));
        }
        catch(NoSuchMethodException e) {
            throw new IllegalStateException(e);
        }
    }

    public static void main(String[] args) throws Exception {
        JsonLines.open();
        RpcNode node=new RpcNode();
        try {
            JsonLines.serve(node::run, true);
        }
        finally {
            if(node.disp != null) node.disp.stop();
            if(node.ch != null) node.ch.close();
        }
        System.exit(0);
    }

    Map<String,Object> run(Map<String,Object> cmd) throws Exception {
        switch((String)cmd.get("cmd")) {
            case "connect": return connect(cmd);
            case "call": return call(cmd);
            case "bench": return bench(cmd);
            case "served": return Json.obj("served", served.get());
            default: throw new IllegalArgumentException("unknown command " + cmd.get("cmd"));
        }
    }

    Map<String,Object> connect(Map<String,Object> cmd) throws Exception {
        ch=new JChannel((String)cmd.get("config"));
        INSTANCE_NAME=(String)cmd.get("name");
        ch.setName(INSTANCE_NAME);
        disp=new RpcDispatcher(ch, null, new ReceiverAdapter() {
            public void viewAccepted(View v) {
                List<Object> names=new ArrayList<>();
                for(Address a: v.getMembers()) names.add(String.valueOf(a));
                JsonLines.emit(Json.obj("event", "view", "members", names));
            }
        }, new TypedServer());
        disp.setMethodLookup(new MethodLookup() {
            public Method findMethod(short id) {return IDS.get(id);}
        });
        ch.connect((String)cmd.get("cluster"));
        return Json.obj("address", String.valueOf(ch.getAddress()));
    }

    Address member(String name) {
        for(Address a: ch.getView().getMembers())
            if(name.equals(String.valueOf(a))) return a;
        throw new IllegalArgumentException("no member " + name);
    }

    List<Address> dests(Object o) {
        if(o == null) return null;
        List<Address> r=new ArrayList<>();
        for(Object n: (List<?>)o) r.add(member((String)n));
        return r;
    }

    static Object[] typed(Object spec, Class<?>[] types) {
        List<?> l=(List<?>)spec;
        String t=(String)l.get(0);
        Object v=l.get(1);
        switch(t) {
            case "int": types[0]=int.class; return new Object[]{(int)Codec.toLong(v, t)};
            case "Integer": types[0]=Integer.class; return new Object[]{(int)Codec.toLong(v, t)};
            case "long": types[0]=long.class; return new Object[]{Codec.toLong(v, t)};
            case "short": types[0]=short.class; return new Object[]{(short)Codec.toLong(v, t)};
            case "byte": types[0]=byte.class; return new Object[]{(byte)Codec.toLong(v, t)};
            case "float": types[0]=float.class; return new Object[]{(float)Codec.toDouble(v, t)};
            case "double": types[0]=double.class; return new Object[]{Codec.toDouble(v, t)};
            case "boolean": types[0]=boolean.class; return new Object[]{Codec.toBool(v, t)};
            case "char": types[0]=char.class; return new Object[]{((String)v).charAt(0)};
            case "String": types[0]=String.class; return new Object[]{(String)v};
            case "bytes": types[0]=byte[].class; return new Object[]{Json.unhex((String)v)};
            case "null": types[0]=Object.class; return new Object[]{null};
            case "list": {
                types[0]=List.class;
                List<Object> r=new ArrayList<>();
                for(Object x: (List<?>)v) r.add(typed(x, new Class<?>[1])[0]);
                return new Object[]{r};
            }
            case "map": {
                types[0]=Map.class;
                Map<Object,Object> r=new HashMap<>();
                for(Map.Entry<?,?> e: ((Map<?,?>)v).entrySet()) r.put(e.getKey(), typed(e.getValue(), new Class<?>[1])[0]);
                return new Object[]{r};
            }
            default: throw new IllegalArgumentException("unknown argument type " + t);
        }
    }

    static int mode(Object rsp) {
        switch(rsp == null ? "GET_ALL" : (String)rsp) {
            case "GET_FIRST": return Request.GET_FIRST;
            case "GET_MAJORITY": return Request.GET_MAJORITY;
            case "GET_NONE": return Request.GET_NONE;
            default: return Request.GET_ALL;
        }
    }

    MethodCall methodCall(Map<String,Object> cmd) throws Exception {
        String method=(String)cmd.get("method");
        List<?> specs=cmd.get("args") == null ? new ArrayList<>() : (List<?>)cmd.get("args");
        Object[] args=new Object[specs.size()];
        Class<?>[] types=new Class<?>[specs.size()];
        for(int i=0; i < args.length; i++) {
            Class<?>[] t=new Class<?>[1];
            args[i]=typed(specs.get(i), t)[0];
            types[i]=t[0];
        }
        String mode=cmd.get("mode") == null ? "TYPES" : (String)cmd.get("mode");
        switch(mode) {
            case "OLD": return new MethodCall(method, args);
            case "SIGNATURE": {
                String[] sig=new String[types.length];
                for(int i=0; i < sig.length; i++) sig[i]=types[i].getName();
                return new MethodCall(method, args, sig);
            }
            case "METHOD": return new MethodCall(TypedServer.class.getMethod(method, types), args);
            case "ID": return new MethodCall((short)Codec.toLong(cmd.get("method_id"), "method_id"), args);
            default: return new MethodCall(method, args, types);
        }
    }

    Map<String,Object> call(Map<String,Object> cmd) throws Exception {
        MethodCall mc=methodCall(cmd);
        long timeout=cmd.get("timeout_ms") == null ? 5000 : Codec.toLong(cmd.get("timeout_ms"), "timeout_ms");
        RequestOptions opts=new RequestOptions(mode(cmd.get("rsp")), timeout);
        if(cmd.get("oob") != null && Codec.toBool(cmd.get("oob"), "oob"))
            opts.setFlags(org.jgroups.Message.OOB);
        long t0=System.nanoTime();
        RspList rsps=disp.callRemoteMethods(dests(cmd.get("dests")), mc, opts);
        long took=System.nanoTime() - t0;
        List<Object> results=new ArrayList<>();
        for(Object o: rsps.values()) {
            Rsp r=(Rsp)o;
            results.add(Json.obj("member", String.valueOf(r.getSender()), "received", r.wasReceived(),
                                 "suspected", r.wasSuspected(), "value", SerGolden.describe(r.getValue())));
        }
        return Json.obj("results", results, "ns", took);
    }

    Map<String,Object> bench(Map<String,Object> cmd) throws Exception {
        List<Address> dests=dests(cmd.get("dests"));
        int count=(int)Codec.toLong(cmd.get("count"), "count");
        int warmup=cmd.get("warmup") == null ? 0 : (int)Codec.toLong(cmd.get("warmup"), "warmup");
        int size=(int)Codec.toLong(cmd.get("size"), "size");
        boolean async=cmd.get("async") != null && Codec.toBool(cmd.get("async"), "async");
        RequestOptions opts=new RequestOptions(mode(cmd.get("rsp")), 10000);
        if(cmd.get("anycast") != null && Codec.toBool(cmd.get("anycast"), "anycast"))
            opts.setAnycasting(true);
        MethodCall mc=new MethodCall("echoBytes", new Object[]{new byte[size]}, new Class[]{byte[].class});
        for(int i=0; i < warmup; i++)
            disp.callRemoteMethods(dests, mc, opts);
        if(!async) {
            List<Object> ns=new ArrayList<>();
            int missing=0;
            long t0=System.nanoTime();
            for(int i=0; i < count; i++) {
                long s=System.nanoTime();
                RspList r=disp.callRemoteMethods(dests, mc, opts);
                ns.add(System.nanoTime() - s);
                if(r.numReceived() == 0) missing++;
            }
            return Json.obj("ns", ns, "total_ns", System.nanoTime() - t0, "missing", missing);
        }
        List<Future<RspList>> futures=new ArrayList<>(count);
        long t0=System.nanoTime();
        for(int i=0; i < count; i++)
            futures.add(disp.callRemoteMethodsWithFuture(dests, mc, opts));
        int missing=0;
        for(Future<RspList> f: futures) {
            RspList r=f.get(30, TimeUnit.SECONDS);
            if(r.numReceived() == 0) missing++;
        }
        return Json.obj("total_ns", System.nanoTime() - t0, "missing", missing);
    }
}

package org.jgpy.interop;

import org.jgroups.Address;
import org.jgroups.Channel;
import org.jgroups.Event;
import org.jgroups.ExtendedReceiver;
import org.jgroups.JChannel;
import org.jgroups.Message;
import org.jgroups.MergeView;
import org.jgroups.Version;
import org.jgroups.View;
import org.jgroups.util.UUID;

import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.security.MessageDigest;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Set;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.InputStreamReader;
import java.io.OutputStream;
import java.io.PrintStream;
import java.io.PrintWriter;
import java.io.StringWriter;
import java.lang.reflect.InvocationTargetException;
import java.nio.charset.Charset;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The Java side of the jgpy interop harness: a JGroups 2.12.2 node driven by JSON-line commands on stdin,
 * answering with JSON-line replies and events on stdout. The contract is interop/PROTOCOL.md.
 *
 * <p>stdout carries only protocol lines; everything else (JGroups logging, the GMS address banner) goes to
 * stderr, because System.out is redirected to System.err at start-up.</p>
 */
public final class JgpyNode {
    private static PrintStream proto;

    private JChannel channel;
    private final LockCommands locks=new LockCommands();
    // ---- state transfer (set_state_provider, get_state, get_log): see interop/PROTOCOL.md ----
    private volatile StateSpec stateSpec;                                 // the provider's (full) state
    private volatile Map<String,StateSpec> partialSpecs=new HashMap<>();  // state_id -> partial state
    private volatile boolean logMode;                  // the state is the log of delivered multicasts
    // lock-free: a delivering thread must never block here (BARRIER does not wait for a thread that is not RUNNABLE)
    private final java.util.concurrent.ConcurrentLinkedQueue<byte[]> deliveryLog=new java.util.concurrent.ConcurrentLinkedQueue<>();
    private volatile long reportMax=65536;             // set_state events carry the state as hex up to this size
    private volatile long expectSize=-1;               // set_state streams: read this many bytes, then close
    private volatile boolean countOnly;
    private volatile Journal journal;          // connect {"journal": RUN_DIR}: the delivery journal (Journal.java)
    private volatile long receiveSleepMs;      // a slow receiver: sleep this long in receive() per message
    private final AtomicLong received=new AtomicLong(), receivedBytes=new AtomicLong(), sent=new AtomicLong();
    // System.nanoTime() of the first and last message received (count mode throughput), 0 if none
    private volatile long firstRecvNs=0, lastRecvNs=0;

    private static final Object NO_REPLY=new Object();

    public static void main(String[] args) throws Exception {
        proto=new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err);
        new JgpyNode().run();
    }

    // ------------------------------------------------------------------ output

    static void emit(Map<String,Object> m) {
        String line=Json.write(m);
        synchronized(proto) {
            proto.print(line);
            proto.print('\n');
            proto.flush();
        }
    }

    static void event(String name, Object... kv) {
        Map<String,Object> m=Json.obj("event", name);
        for(int i=0; i < kv.length; i+=2) m.put((String)kv[i], kv[i + 1]);
        emit(m);
    }

    static Throwable unwrap(Throwable t) {
        while(t instanceof InvocationTargetException && t.getCause() != null) t=t.getCause();
        return t;
    }

    static String describe(Throwable t) {
        return t.getClass().getName() + ": " + t.getMessage();
    }

    static String trace(Throwable t) {
        StringWriter sw=new StringWriter();
        t.printStackTrace(new PrintWriter(sw));
        return sw.toString();
    }

    static void errorEvent(String where, Throwable t) {
        t=unwrap(t);
        event("error", "error", where + ": " + describe(t), "trace", trace(t));
    }

    // ------------------------------------------------------------------ command loop

    /** Commands the reader runs at once, ahead of those still queued (fault injection, a crash). */
    static final Set<String> CONTROL=new HashSet<>(Arrays.asList("discard", "halt"));

    /** Runs one command and emits its reply (or its failure). */
    void execute(Map<String,Object> cmd) {
        Object id=cmd.get("id");
        try {
            Object cmdName=cmd.get("cmd");
            if(!(cmdName instanceof String))
                throw new IllegalArgumentException("command without a \"cmd\" string");
            Object res=dispatch((String)cmdName, cmd);
            if(res == NO_REPLY) return;
            Map<String,Object> reply=Json.obj("reply", id, "ok", true);
            @SuppressWarnings("unchecked")
            Map<String,Object> r=(Map<String,Object>)res;
            if(r != null) reply.putAll(r);
            emit(reply);
            if("exit".equals(cmdName)) {
                proto.flush();
                System.exit(0);
            }
        }
        catch(Throwable t) {
            t=unwrap(t);
            emit(Json.obj("reply", id, "ok", false, "error", describe(t), "trace", trace(t)));
        }
    }

    void run() throws Exception {
        event("ready", "jgroups", Version.description, "java", System.getProperty("java.version"),
              "charset", Charset.defaultCharset().name());
        BufferedReader in=new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        // commands run one after the other on a worker thread, in the order they came; control commands run at
        // once on this reader: a fault injected while a long send blocks on flow control must not wait for it
        java.util.concurrent.ExecutorService worker=java.util.concurrent.Executors.newSingleThreadExecutor(r -> {
            Thread t=new Thread(r, "node-commands");
            t.setDaemon(true);
            return t;
        });
        String line;
        while((line=in.readLine()) != null) {
            if(line.trim().isEmpty()) continue;
            Map<String,Object> cmd;
            try {
                cmd=Codec.toMap(Json.parse(line), "command");
            }
            catch(Throwable t) {
                t=unwrap(t);
                emit(Json.obj("reply", null, "ok", false, "error", describe(t), "trace", trace(t)));
                continue;
            }
            if(CONTROL.contains(cmd.get("cmd")))
                execute(cmd);
            else
                worker.execute(() -> execute(cmd));
        }
        worker.shutdown();
        worker.awaitTermination(1, java.util.concurrent.TimeUnit.HOURS);
        // the driver went away: do not linger
        closeJournal();
        proto.flush();
        Runtime.getRuntime().halt(0);
    }

    Object dispatch(String name, Map<String,Object> cmd) throws Exception {
        switch(name) {
            case "ping":    return Json.obj();
            case "connect": return connect(cmd);
            case "send":    return send(cmd);
            case "view":    return viewBody(requireChannel().getView());
            case "stats":   return Json.obj("received", received.get(), "received_bytes", receivedBytes.get(), "sent", sent.get(),
                                        "first_recv_ns", firstRecvNs, "last_recv_ns", lastRecvNs);
            case "reset_stats":
                received.set(0); receivedBytes.set(0); sent.set(0); firstRecvNs=0; lastRecvNs=0;
                return Json.obj();
            case "dump_stats": return protocolStats();
            case "discard": return discard(cmd);
            case "set_state_provider": return setStateProvider(cmd);
            case "get_state": {
                JChannel ch=requireChannel();
                Address target=resolve(cmd.get("target"));
                Object to=cmd.get("timeout_ms") != null ? cmd.get("timeout_ms") : cmd.get("timeout");  // HarnessNode.call takes "timeout"
                long timeout=to != null ? Codec.toLong(to, "timeout") : 5000L;
                String state_id=Codec.toStr(cmd.get("state_id"), "state_id");
                reportMax=cmd.get("report_max") != null ? Codec.toLong(cmd.get("report_max"), "report_max") : 65536;
                expectSize=cmd.get("expect_size") != null ? Codec.toLong(cmd.get("expect_size"), "expect_size") : -1;
                long t0=System.nanoTime();
                boolean rc=ch.getState(target, state_id, timeout);
                return Json.obj("result", rc, "seconds", (System.nanoTime() - t0) / 1e9);
            }
            case "start_flush": {      // JChannel.startFlush([members,] automatic_resume): one attempt, as Java
                JChannel ch=requireChannel();
                boolean resume=cmd.get("automatic_resume") != null && Codec.toBool(cmd.get("automatic_resume"), "automatic_resume");
                List<Address> mbrs=resolveList(cmd.get("members"));
                long t0=System.nanoTime();
                boolean rc=mbrs == null ? ch.startFlush(resume) : ch.startFlush(mbrs, resume);
                return Json.obj("result", rc, "seconds", (System.nanoTime() - t0) / 1e9);
            }
            case "stop_flush": {
                JChannel ch=requireChannel();
                List<Address> mbrs=resolveList(cmd.get("members"));
                long t0=System.nanoTime();
                if(mbrs == null) ch.stopFlush(); else ch.stopFlush(mbrs);
                return Json.obj("seconds", (System.nanoTime() - t0) / 1e9);
            }
            case "suspend_but_fail": { // START_FLUSH to the view, returns at once (2.12's FlushTest)
                requireChannel().down(new Event(Event.SUSPEND_BUT_FAIL));
                return Json.obj();
            }
            case "get_log": {
                List<Object> entries=new ArrayList<>();
                for(byte[] e: deliveryLog) entries.add(Json.hex(e));
                return Json.obj("count", (long)entries.size(), "entries", entries);
            }
            case "state_request_encode": {      // what STREAMING_STATE_TRANSFER's requester writes on the socket
                ByteArrayOutputStream bos=new ByteArrayOutputStream();
                ObjectOutputStream oos=new ObjectOutputStream(bos);
                oos.writeObject(Codec.toStr(cmd.get("state_id"), "state_id"));
                oos.writeObject(cmd.get("address") == null ? null : Codec.buildAddress(cmd.get("address")));
                oos.flush();
                return Json.obj("hex", Json.hex(bos.toByteArray()));
            }
            case "state_request_decode": {      // what the provider reads from it
                byte[] data=Codec.toBytes(cmd.get("hex"), "hex");
                ObjectInputStream ois=new ObjectInputStream(new ByteArrayInputStream(data));
                String sid=(String)ois.readObject();
                Object addr=ois.readObject();
                return Json.obj("state_id", sid, "address", Codec.toJson(addr),
                                "class", addr == null ? null : addr.getClass().getName());
            }
            case "disconnect":
                requireChannel().disconnect();
                closeJournal();
                return Json.obj();
            case "close":
                requireChannel().close();
                closeJournal();
                return Json.obj();
            case "halt":
                proto.flush();
                Runtime.getRuntime().halt(9);
                return NO_REPLY;
            case "exit":
                closeJournal();
                return Json.obj();
            case "encode": {
                String kind=Codec.toStr(cmd.get("kind"), "kind");
                if(kind == null) throw new IllegalArgumentException("encode needs a kind");
                return Json.obj("hex", Json.hex(Codec.encode(kind, cmd.get("value"))));
            }
            case "decode": {
                String kind=Codec.toStr(cmd.get("kind"), "kind");
                if(kind == null) throw new IllegalArgumentException("decode needs a kind");
                byte[] data=Codec.toBytes(cmd.get("hex"), "hex");
                if(data == null) throw new IllegalArgumentException("decode needs hex");
                return Codec.decode(kind, data);
            }
            case "lock": case "unlock": case "unlock_all": case "lock_loop": case "print_locks":
                return locks.dispatch(name, cmd, requireChannel());
            case "bench_codec": {
                double seconds=cmd.get("seconds") != null ? Codec.toDouble(cmd.get("seconds"), "seconds") : 3.0;
                double warmup=cmd.get("warmup") != null ? Codec.toDouble(cmd.get("warmup"), "warmup") : Math.min(2.0, seconds);
                return Json.obj("results", CodecBench.run(seconds, warmup));
            }
        }
        throw new IllegalArgumentException("unknown command '" + name + "'");
    }

    JChannel requireChannel() {
        if(channel == null) throw new IllegalStateException("not connected (no channel)");
        return channel;
    }

    void closeJournal() {
        Journal j=journal;
        journal=null;
        if(j != null) j.close();
    }

    // ------------------------------------------------------------------ channel

    Object connect(Map<String,Object> cmd) throws Exception {
        if(channel != null && channel.isOpen())
            throw new IllegalStateException("a channel is already open; close it first");
        Object props=cmd.get("props");
        if(props != null) {
            for(Map.Entry<String,Object> e: Codec.toMap(props, "props").entrySet()) {
                Object v=e.getValue();
                if(v == null) System.clearProperty(e.getKey());
                else System.setProperty(e.getKey(), v instanceof String ? (String)v : Json.write(v));
            }
        }
        String config=cmd.get("config") != null ? Codec.toStr(cmd.get("config"), "config") : "udp.xml";
        String cluster=Codec.toStr(cmd.get("cluster"), "cluster");
        if(cluster == null) throw new IllegalArgumentException("connect needs a cluster name");
        String name=Codec.toStr(cmd.get("name"), "name");
        String mode=cmd.get("receive") != null ? Codec.toStr(cmd.get("receive"), "receive") : "events";
        if(!mode.equals("events") && !mode.equals("count"))
            throw new IllegalArgumentException("receive must be \"events\" or \"count\"");
        countOnly=mode.equals("count");
        receiveSleepMs=cmd.get("receive_sleep_ms") != null ? Codec.toLong(cmd.get("receive_sleep_ms"), "receive_sleep_ms") : 0;

        JChannel ch=new JChannel(config);
        if(name != null) ch.setName(name);
        holdSends=cmd.get("blocks") != null && Codec.toBool(cmd.get("blocks"), "blocks");
        synchronized(sendLock) {blocked=false;}
        if(holdSends) ch.setOpt(Channel.BLOCK, Boolean.TRUE);
        ch.setReceiver(new Recv());
        if(cmd.get("journal") != null) {     // the stack bottom first, as jgpy lists it
            List<String> stack=new ArrayList<>();
            for(org.jgroups.stack.Protocol p: ch.getProtocolStack().getProtocols()) stack.add(0, p.getName());
            journal=new Journal(Codec.toStr(cmd.get("journal"), "journal"), name, stack, 65536, 1000);
        }
        channel=ch;
        Map<String,Object> st=cmd.get("state") != null ? Codec.toMap(cmd.get("state"), "state") : null;
        Object stateResult=null;
        try {
            if(st == null && cmd.get("use_flush") != null)    // JChannel.connect(cluster, useFlushIfPresent)
                ch.connect(cluster, Codec.toBool(cmd.get("use_flush"), "use_flush"));
            else if(st == null)
                ch.connect(cluster);
            else {                          // JChannel.connect(cluster, target, state_id, timeout): one flush for both
                Object to=st.get("timeout");
                ch.connect(cluster, st.get("target") == null ? null : Codec.buildAddress(st.get("target")),
                           Codec.toStr(st.get("state_id"), "state_id"), to != null ? Codec.toLong(to, "timeout") : 5000L);
                stateResult=Boolean.TRUE;
            }
        }
        catch(Exception e) {
            try {ch.close();} catch(Throwable ignored) {}
            channel=null;
            closeJournal();
            throw e;
        }
        Address addr=ch.getAddress();
        Object phys=ch.downcall(new Event(Event.GET_PHYSICAL_ADDRESS, addr));
        return Json.obj("address", Codec.toJson(addr), "name", ch.getName(), "physical", Codec.toJson(phys),
                        "view", viewBody(ch.getView()), "state", stateResult);
    }

    Address resolve(Object dest) throws Exception {
        if(dest == null) return null;
        if(dest instanceof String) {
            String n=(String)dest;
            View v=requireChannel().getView();
            if(v != null)
                for(Address a: v.getMembers())
                    if(n.equals(UUID.get(a))) return a;
            for(Map.Entry<Address,String> e: UUID.getContents().entrySet())   // e.g. a member of another partition
                if(n.equals(e.getValue())) return e.getKey();
            throw new IllegalArgumentException("no member named '" + n + "' in the current view " + v);
        }
        return Codec.buildAddress(dest);
    }

    List<Address> resolveList(Object members) throws Exception {
        if(members == null) return null;
        List<Address> out=new ArrayList<>();
        for(Object m: (List<?>)members) out.add(resolve(m));
        return out;
    }

    // connect {"blocks": true}: the channel calls block()/unblock() (setOpt(Channel.BLOCK)) and, as a 2.12
    // application should, the send loop sends nothing between block() and unblock(): a journal row's view is
    // then the view the message is sent in (FLUSH would otherwise hold it into the next view)
    volatile boolean holdSends;
    boolean blocked;                           // guarded by sendLock
    final Object sendLock=new Object();

    Object send(Map<String,Object> cmd) throws Exception {
        JChannel ch=requireChannel();
        Address dest=resolve(cmd.get("dest"));
        int given=(cmd.get("payload") != null ? 1 : 0) + (cmd.get("text") != null ? 1 : 0) + (cmd.containsKey("object") ? 1 : 0);
        if(given > 1) throw new IllegalArgumentException("send: give only one of payload, text, object");
        byte[] buf=null;
        Object obj=null;
        boolean hasObj=cmd.containsKey("object");
        if(cmd.get("payload") != null) buf=Codec.toBytes(cmd.get("payload"), "payload");
        else if(cmd.get("text") != null) buf=Codec.toStr(cmd.get("text"), "text").getBytes(StandardCharsets.UTF_8);
        else if(hasObj) obj=Codec.buildJavaObject(cmd.get("object"));
        boolean oob=cmd.get("oob") != null && Codec.toBool(cmd.get("oob"), "oob");
        int extra=cmd.get("flags") != null ? Codec.toByte(cmd.get("flags"), "flags") : 0;
        long count=cmd.get("count") != null ? Codec.toLong(cmd.get("count"), "count") : 1;
        // numbered: payload (bytes, or the String object) gets ":<n>" appended, n = start, start+1, ...
        boolean numbered=cmd.get("numbered") != null && Codec.toBool(cmd.get("numbered"), "numbered");
        long start=cmd.get("start") != null ? Codec.toLong(cmd.get("start"), "start") : 0;
        long t0=System.nanoTime();
        for(long i=0; i < count; i++) {
            byte[] b=buf;
            Object o=obj;
            if(numbered) {
                String suffix=":" + (start + i);
                if(hasObj && obj instanceof String) o=obj + suffix;
                else if(!hasObj) {
                    byte[] base=buf != null ? buf : new byte[0];
                    byte[] sfx=suffix.getBytes(StandardCharsets.US_ASCII);
                    b=Arrays.copyOf(base, base.length + sfx.length);
                    System.arraycopy(sfx, 0, b, base.length, sfx.length);
                }
            }
            Message msg=new Message(dest, null, b);
            if(hasObj) msg.setObject(o);
            byte flags=msg.getFlags();
            if(oob) flags|=Message.OOB;
            flags|=(byte)extra;
            Codec.set(msg, "flags", flags); // raw byte: setFlag() refuses 0x80
            if(holdSends) {
                synchronized(sendLock) {
                    while(blocked) sendLock.wait();
                    Journal j=journal;
                    if(j != null) j.send(msg);
                    ch.send(msg);
                }
            }
            else {
                Journal j=journal;
                if(j != null) j.send(msg);
                ch.send(msg);
            }
            sent.incrementAndGet();
        }
        return Json.obj("seconds", (System.nanoTime() - t0) / 1e9);
    }

    /** Controls the DISCARD protocol of our stack (it must be in the config): partitions and loss. */
    volatile List<Address> partition;

    Map<String,Object> discard(Map<String,Object> cmd) throws Exception {
        JChannel ch=requireChannel();
        org.jgroups.protocols.DISCARD d=(org.jgroups.protocols.DISCARD)ch.getProtocolStack()
          .findProtocol(org.jgroups.protocols.DISCARD.class);
        if(d == null) throw new IllegalStateException("no DISCARD protocol in the stack: add it to the config");
        if(cmd.containsKey("ignore")) {
            d.resetIgnoredMembers();
            List<Address> ignored=new ArrayList<>();
            for(Object o: Codec.toList(cmd.get("ignore"), "ignore"))
                ignored.add(resolve(o));
            for(Address a: ignored)
                d.addIgnoreMember(a);
            // DISCARD forgets ignored members that are not in a new view: "keep" re-applies them on every view
            partition=cmd.get("keep") != null && Codec.toBool(cmd.get("keep"), "keep") ? ignored : null;
        }
        if(cmd.get("discard_all") != null) d.setDiscardAll(Codec.toBool(cmd.get("discard_all"), "discard_all"));
        if(cmd.get("up") != null) d.setUpDiscardRate(((Number)cmd.get("up")).doubleValue());
        if(cmd.get("down") != null) d.setDownDiscardRate(((Number)cmd.get("down")).doubleValue());
        return Json.obj();
    }

    /** JChannel.dumpStats(): protocol name -> {stat: value as a string or number}. */
    Map<String,Object> protocolStats() throws Exception {
        JChannel ch=requireChannel();
        Map<String,Object> out=Json.obj();
        for(Map.Entry<String,Object> e: ch.dumpStats().entrySet()) {
            Map<String,Object> stats=Json.obj();
            if(e.getValue() instanceof Map) {
                for(Map.Entry<?,?> s: ((Map<?,?>)e.getValue()).entrySet()) {
                    Object v=s.getValue();
                    stats.put(String.valueOf(s.getKey()),
                              v instanceof Number || v instanceof Boolean ? v : String.valueOf(v));
                }
            }
            out.put(e.getKey(), stats);
        }
        return Json.obj("stats", out);
    }

    static Map<String,Object> viewBody(View v) throws Exception {
        if(v == null)
            return Json.obj("view_id", null, "members", null, "names", null, "merge", false, "subgroups", null);
        List<Object> mbrs=new ArrayList<>(), names=new ArrayList<>();
        if(v.getMembers() != null)
            for(Address a: v.getMembers()) {
                mbrs.add(Codec.toJson(a));
                names.add(UUID.get(a));
            }
        Object subgroups=null;
        if(v instanceof MergeView && ((MergeView)v).getSubgroups() != null) {
            List<Object> sg=new ArrayList<>();
            for(View s: ((MergeView)v).getSubgroups()) sg.add(Codec.toJson(s));
            subgroups=sg;
        }
        return Json.obj("view_id", Codec.toJson(v.getVid()), "members", mbrs, "names", names,
                        "merge", v instanceof MergeView, "subgroups", subgroups);
    }

    static byte[] readAll(InputStream in) throws Exception {
        ByteArrayOutputStream bos=new ByteArrayOutputStream();
        byte[] b=new byte[8192];
        int n;
        while((n=in.read(b)) >= 0) bos.write(b, 0, n);
        return bos.toByteArray();
    }

    // ------------------------------------------------------------------ state transfer

    /** set_state_provider: {state: hex} | {generate: {size, seed}} | {log: true}, plus partial: {id: spec}. */
    Map<String,Object> setStateProvider(Map<String,Object> cmd) throws Exception {
        boolean log=cmd.get("log") != null && Codec.toBool(cmd.get("log"), "log");
        StateSpec spec=parseSpec(cmd);
        Map<String,StateSpec> partial=new HashMap<>();
        if(cmd.get("partial") != null)
            for(Map.Entry<String,Object> e: Codec.toMap(cmd.get("partial"), "partial").entrySet())
                partial.put(e.getKey(), parseSpec(Codec.toMap(e.getValue(), "partial state " + e.getKey())));
        if(log && !logMode)
            deliveryLog.clear();
        logMode=log;
        stateSpec=spec;
        partialSpecs=partial;
        return Json.obj();
    }

    StateSpec parseSpec(Map<String,Object> m) throws Exception {
        if(m.get("generate") != null) {
            Map<String,Object> g=Codec.toMap(m.get("generate"), "generate");
            return new StateSpec(null, new StateGen(g.get("seed") != null ? Codec.toLong(g.get("seed"), "seed") : 0),
                                 Codec.toLong(g.get("size"), "size"), false);
        }
        if(m.get("log") != null && Codec.toBool(m.get("log"), "log"))
            return new StateSpec(null, null, 0, true);
        byte[] fixed=Codec.toBytes(m.get("state"), "state");
        return fixed == null ? null : new StateSpec(fixed, null, 0, false);
    }

    StateSpec specFor(String state_id) {
        StateSpec s=state_id != null ? partialSpecs.get(state_id) : null;
        return s != null ? s : stateSpec;
    }

    /** The log as a state: [int length][payload] per delivered multicast, in delivery order. */
    byte[] encodeLog() throws Exception {
        ByteArrayOutputStream bos=new ByteArrayOutputStream();
        java.io.DataOutputStream dos=new java.io.DataOutputStream(bos);
        for(byte[] e: deliveryLog) {dos.writeInt(e.length); dos.write(e);}
        dos.flush();
        return bos.toByteArray();
    }

    void installLog(byte[] state) throws Exception {
        List<byte[]> entries=new ArrayList<>();
        java.io.DataInputStream in=new java.io.DataInputStream(new ByteArrayInputStream(state));
        while(in.available() > 0) {
            byte[] e=new byte[in.readInt()];
            in.readFully(e);
            entries.add(e);
        }
        deliveryLog.clear();        // the requester installs the state with its BARRIER closed
        deliveryLog.addAll(entries);
    }

    int logSize() {
        return deliveryLog.size();
    }

    void stateEvent(String name, String state_id, byte[] small, long size, String sha, long t0) {
        Journal j=journal;
        if(j != null) j.other("state", null, (name.equals("get_state") ? "provided " : "installed ") + size + " bytes"
                              + (state_id != null ? " (" + state_id + ")" : ""));
        Map<String,Object> m=Json.obj("event", name, "size", size, "sha256", sha, "seconds", (System.nanoTime() - t0) / 1e9);
        if(state_id != null) m.put("state_id", state_id);
        if(small != null && small.length <= reportMax) m.put("state", Json.hex(small));
        if(logMode) m.put("entries", (long)logSize());
        emit(m);
    }

    static String sha256(byte[] b) throws Exception {
        return Json.hex(MessageDigest.getInstance("SHA-256").digest(b));
    }

    /** A provider state: fixed bytes, generated bytes (StateGen) or the delivery log. */
    final class StateSpec {
        final byte[] fixed; final StateGen gen; final long size; final boolean log;
        StateSpec(byte[] fixed, StateGen gen, long size, boolean log) {
            this.fixed=fixed; this.gen=gen; this.size=size; this.log=log;
        }
        byte[] bytes() throws Exception {
            if(log) return encodeLog();
            if(gen != null) return gen.bytes(size);
            return fixed;
        }
    }

    /**
     * Deterministic state bytes (the same in jgpy.testing.node.generate_state): 64 KiB blocks; block i is a
     * 64 KiB base block rotated left by (i*40503) mod 65536 with its first 8 bytes replaced by i (big-endian);
     * the base block is SHA-256("jgpy-state" + seed (8 bytes BE) + k (4 bytes BE)) for k = 0..2047.
     */
    static final class StateGen {
        static final int BLOCK=65536;
        final byte[] base2=new byte[2 * BLOCK];

        StateGen(long seed) throws Exception {
            MessageDigest md=MessageDigest.getInstance("SHA-256");
            java.nio.ByteBuffer bb=java.nio.ByteBuffer.allocate(22);
            for(int k=0; k < BLOCK / 32; k++) {
                bb.clear();
                bb.put("jgpy-state".getBytes(StandardCharsets.US_ASCII)).putLong(seed).putInt(k);
                byte[] h=md.digest(bb.array());
                System.arraycopy(h, 0, base2, k * 32, 32);
            }
            System.arraycopy(base2, 0, base2, BLOCK, BLOCK);
        }

        void block(long i, byte[] out) {
            int r=(int)((i * 40503L) & 0xFFFF);
            System.arraycopy(base2, r, out, 0, BLOCK);
            for(int b=0; b < 8; b++) out[b]=(byte)(i >>> (56 - 8 * b));
        }

        /** Written in pieces of 8 KiB (a Java default-transport requester cannot take bigger STATE_PARTs). */
        long write(OutputStream out, long size) throws Exception {
            byte[] blk=new byte[BLOCK];
            long done=0;
            for(long i=0; done < size; i++) {
                block(i, blk);
                int n=(int)Math.min(BLOCK, size - done);
                for(int off=0; off < n; off+=8192) out.write(blk, off, Math.min(8192, n - off));
                done+=n;
            }
            return done;
        }

        byte[] bytes(long size) {
            if(size > Integer.MAX_VALUE - 16) throw new IllegalArgumentException("a byte[] state of " + size + " bytes");
            byte[] all=new byte[(int)size], blk=new byte[BLOCK];
            int done=0;
            for(long i=0; done < size; i++) {
                block(i, blk);
                int n=(int)Math.min(BLOCK, size - done);
                System.arraycopy(blk, 0, all, done, n);
                done+=n;
            }
            return all;
        }
    }

    final class Recv implements ExtendedReceiver {
        public void receive(Message msg) {
            try {
                Journal j=journal;
                if(j != null) j.deliver(msg);
                long now=System.nanoTime();
                if(received.incrementAndGet() == 1)
                    firstRecvNs=now;
                lastRecvNs=now;
                receivedBytes.addAndGet(msg.getLength());
                if(logMode && msg.getDest() == null) {
                    byte[] p=msg.getBuffer();
                    deliveryLog.add(p == null ? new byte[0] : p);
                }
                if(receiveSleepMs > 0) Thread.sleep(receiveSleepMs);
                if(countOnly) return;
                byte[] raw=msg.getRawBuffer();
                Address src=msg.getSrc();
                event("msg", "src", Codec.toJson(src), "src_name", src == null ? null : UUID.get(src),
                      "dest", Codec.toJson(msg.getDest()), "flags", msg.getFlags() & 0xff,
                      "payload", raw == null ? null : Json.hex(raw, msg.getOffset(), msg.getLength()),
                      "headers", Codec.headersJson(msg, true));
            }
            catch(Throwable t) {errorEvent("receive", t);}
        }

        public void viewAccepted(View v) {
            try {
                Journal j=journal;
                if(j != null) j.view(v);
                List<Address> keep=partition;
                if(keep != null && channel != null) {
                    org.jgroups.protocols.DISCARD d=(org.jgroups.protocols.DISCARD)channel.getProtocolStack()
                      .findProtocol(org.jgroups.protocols.DISCARD.class);
                    if(d != null) for(Address a: keep) d.addIgnoreMember(a);
                }
                Map<String,Object> m=Json.obj("event", "view");
                m.putAll(viewBody(v));
                emit(m);
            }
            catch(Throwable t) {errorEvent("viewAccepted", t);}
        }

        public void suspect(Address mbr) {
            try {Journal j=journal; if(j != null) j.other("suspect", mbr, null); event("suspect", "member", Codec.toJson(mbr), "name", mbr == null ? null : UUID.get(mbr));}
            catch(Throwable t) {errorEvent("suspect", t);}
        }

        public void block() {
            synchronized(sendLock) {blocked=true;}       // after the send under way, if any
            Journal j=journal; if(j != null) j.other("block", null, null); event("block");
        }
        public void unblock() {
            synchronized(sendLock) {blocked=false; sendLock.notifyAll();}
            Journal j=journal; if(j != null) j.other("unblock", null, null); event("unblock");
        }

        public byte[] getState() {
            return getState((String)null);
        }

        public byte[] getState(String state_id) {
            long t0=System.nanoTime();
            try {
                StateSpec spec=specFor(state_id);
                byte[] s=spec == null ? null : spec.bytes();
                stateEvent("get_state", state_id, s, s == null ? 0 : s.length, s == null ? null : sha256(s), t0);
                return s;
            }
            catch(Throwable t) {errorEvent("getState", t); return null;}
        }

        public void getState(OutputStream out) {
            getState((String)null, out);
        }

        public void getState(String state_id, OutputStream out) {
            long t0=System.nanoTime();
            try {
                StateSpec spec=specFor(state_id);
                byte[] small=null;
                long n=0;
                if(spec != null && spec.gen != null)
                    n=spec.gen.write(out, spec.size);
                else if(spec != null && (small=spec.bytes()) != null) {
                    for(int off=0; off < small.length; off+=8192) out.write(small, off, Math.min(8192, small.length - off));
                    n=small.length;
                }
                out.flush();
                stateEvent("get_state", state_id, small, n, small == null ? null : sha256(small), t0);
            }
            catch(Throwable t) {errorEvent("getState(OutputStream)", t);}
            finally {
                try {out.close();} catch(Throwable ignored) {}
            }
        }

        public void setState(byte[] state) {
            setState((String)null, state);
        }

        public void setState(String state_id, byte[] state) {
            long t0=System.nanoTime();
            try {
                if(logMode && state_id == null) installLog(state);   // a partial state is only reported
                stateEvent("set_state", state_id, state, state == null ? 0 : state.length,
                           state == null ? null : sha256(state), t0);
            }
            catch(Throwable t) {errorEvent("setState", t);}
        }

        public void setState(InputStream in) {
            setState((String)null, in);
        }

        public void setState(String state_id, InputStream in) {
            long t0=System.nanoTime();
            try {
                // chunks, hashed as they come: a big state is never held (only what is reported or logged)
                MessageDigest md=MessageDigest.getInstance("SHA-256");
                long limit=expectSize, keepMax=logMode ? Long.MAX_VALUE : reportMax, n=0;
                ByteArrayOutputStream kept=new ByteArrayOutputStream();
                byte[] buf=new byte[65536];
                while(limit < 0 || n < limit) {
                    int want=limit < 0 ? buf.length : (int)Math.min(buf.length, limit - n);
                    int r=in.read(buf, 0, want);
                    if(r < 0) break;
                    md.update(buf, 0, r);
                    if(kept != null) {
                        if(n + r <= keepMax) kept.write(buf, 0, r);
                        else kept=null;
                    }
                    n+=r;
                }
                byte[] s=kept != null ? kept.toByteArray() : null;
                if(logMode && state_id == null && s != null) installLog(s);
                stateEvent("set_state", state_id, s, n, Json.hex(md.digest()), t0);
            }
            catch(Throwable t) {errorEvent("setState(InputStream)", t);}
            finally {
                try {in.close();} catch(Throwable ignored) {}
            }
        }
    }
}

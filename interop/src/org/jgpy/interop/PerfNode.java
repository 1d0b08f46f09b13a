package org.jgpy.interop;

import org.jgroups.Address;
import org.jgroups.JChannel;
import org.jgroups.Message;
import org.jgroups.ReceiverAdapter;
import org.jgroups.Version;
import org.jgroups.View;
import org.jgroups.util.UUID;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;

/**
 * One member of the end-to-end benchmark (jgpy's {@code benchmarks/e2e.py}, {@code python -m jgpy perf}): a
 * JGroups 2.12.2 channel driven by JSON-line commands on stdin, with results as JSON lines on stdout. The jgpy
 * member ({@code jgpy/tools/perf_member.py}) implements the same contract, so both kinds run exactly the same
 * workload; it is described in {@code benchmarks/README.md}.
 *
 * <pre>
 * java -cp interop/build/classes:/usr/share/java/jgroups.jar org.jgpy.interop.PerfNode \
 *      --name J1 --cluster perf-x [--config udp.xml] [--prop jgroups.udp.mcast_addr=232.1.2.3 ...]
 * </pre>
 *
 * Commands ({@code {"cmd": ..., "id": n, ...}}, each answered by {@code {"reply": n, "ok": true, ...}}):
 * {@code connect {use_flush}} (optional {@code use_flush}: false connects with {@code JChannel.connect(cluster, false)},
 * which a stack without GMS needs, e.g. SMACK's), {@code await_view {members, timeout}}, {@code arm {run, role, size, count, warmup, expect,
 * dest, timeout}} (role: sender, receiver, both, requester, responder, idle), {@code go {run}} (starts the
 * sender/requester; returns at once), {@code stop {run}}, {@code exit}. A measurement ends with one
 * {@code {"event": "result", "run": r, ...}} line.
 *
 * <p>Payload of every benchmark message: int run id (big-endian), one phase byte (0 warm-up, 1 measured,
 * 2 request, 3 response), int round number (requests/responses), zeros up to {@code size}.</p>
 */
public final class PerfNode {
    static final byte WARM=0, MEASURED=1, REQUEST=2, RESPONSE=3;

    private static PrintStream out;
    private final Map<String,String> opts;
    private JChannel ch;
    private Address self;

    // ---- the armed measurement (written by the command thread before the run starts) ----
    private volatile Run run;

    /** Everything one measurement counts; the receive thread(s) write it, the waiter reads it. */
    static final class Run {
        final int id, size, count, warmup;
        final long expect;
        final String role;
        final Address dest;
        final double timeout;
        final CountDownLatch recvDone=new CountDownLatch(1);
        final Object lock=new Object();
        long received, warmReceived, bytes, firstNs, lastNs;
        long answered;
        // requester
        final Semaphore response=new Semaphore(0);
        volatile int waitingRound=-1;
        volatile boolean stopped;

        Run(int id, String role, int size, int count, int warmup, long expect, Address dest, double timeout) {
            this.id=id; this.role=role; this.size=size; this.count=count; this.warmup=warmup;
            this.expect=expect; this.dest=dest; this.timeout=timeout;
        }

        boolean receives() {return role.equals("receiver") || role.equals("both");}
        boolean sends()    {return role.equals("sender") || role.equals("both");}
    }

    PerfNode(Map<String,String> opts) {this.opts=opts;}

    public static void main(String[] args) throws Exception {
        out=new PrintStream(new FileOutputStream(FileDescriptor.out), true, "UTF-8");
        System.setOut(System.err);                // JGroups' banners must not pollute the protocol
        Map<String,String> opts=new java.util.LinkedHashMap<>();
        List<String> props=new ArrayList<>();
        for(int i=0; i < args.length; i++) {
            String a=args[i];
            if(!a.startsWith("--") || i + 1 >= args.length) usage("bad argument " + a);
            String v=args[++i];
            if(a.equals("--prop")) props.add(v);
            else opts.put(a.substring(2), v);
        }
        for(String p: props) {
            int eq=p.indexOf('=');
            if(eq <= 0) usage("--prop needs key=value, got " + p);
            System.setProperty(p.substring(0, eq), p.substring(eq + 1));
        }
        if(!opts.containsKey("name") || !opts.containsKey("cluster")) usage("--name and --cluster are required");
        new PerfNode(opts).loop();
    }

    static void usage(String why) {
        System.err.println(why + "\nusage: PerfNode --name N --cluster C [--config udp.xml] [--prop k=v]...");
        System.exit(2);
    }

    static void emit(Map<String,Object> m) {
        String line=Json.write(m);
        synchronized(out) {
            out.print(line);
            out.print('\n');
            out.flush();
        }
    }

    // ------------------------------------------------------------------ commands

    void loop() throws Exception {
        emit(Json.obj("event", "started", "kind", "java", "jgroups", Version.description,
                      "java", System.getProperty("java.version"), "pid", ProcessHandle.current().pid()));
        BufferedReader in=new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while((line=in.readLine()) != null) {
            if(line.trim().isEmpty()) continue;
            Object id=null;
            try {
                @SuppressWarnings("unchecked") Map<String,Object> cmd=(Map<String,Object>)Json.parse(line);
                id=cmd.get("id");
                String name=String.valueOf(cmd.get("cmd"));
                Map<String,Object> rep;
                switch(name) {
                    case "connect":    rep=connect(cmd); break;
                    case "await_view": rep=awaitView(cmd); break;
                    case "arm":        rep=arm(cmd); break;
                    case "go":         rep=go(cmd); break;
                    case "stop":       rep=stop(cmd); break;
                    case "exit":                      // the run is over: no graceful leave (the whole
                        emit(Json.obj("reply", id, "ok", true));    // cluster goes at once)
                        Runtime.getRuntime().halt(0);
                        return;
                    default: throw new IllegalArgumentException("unknown command " + name);
                }
                rep.put("reply", id);
                rep.put("ok", true);
                emit(rep);
            }
            catch(Throwable t) {
                emit(Json.obj("reply", id, "ok", false, "error", t.getClass().getName() + ": " + t.getMessage()));
            }
        }
        Runtime.getRuntime().halt(0);             // stdin closed: the driver is gone
    }

    Map<String,Object> connect(Map<String,Object> cmd) throws Exception {
        Object useFlush=cmd.get("use_flush");
        if(useFlush != null && !(useFlush instanceof Boolean))
            throw new IllegalArgumentException("use_flush must be true or false, got " + useFlush);
        long t0=System.nanoTime();
        ch=new JChannel(opts.getOrDefault("config", "udp.xml"));
        ch.setName(opts.get("name"));
        ch.setReceiver(new Recv());
        if(useFlush == null) ch.connect(opts.get("cluster"));
        else ch.connect(opts.get("cluster"), (Boolean)useFlush);
        self=ch.getAddress();
        return Json.obj("view", (long)ch.getView().size(), "seconds", (System.nanoTime() - t0) / 1e9);
    }

    Map<String,Object> awaitView(Map<String,Object> cmd) throws Exception {
        long members=num(cmd, "members", 2);
        long deadline=System.nanoTime() + (long)(dbl(cmd, "timeout", 60) * 1e9);
        while(ch.getView().size() < members && System.nanoTime() < deadline) Thread.sleep(20);
        List<Object> names=new ArrayList<>();
        for(Address a: ch.getView().getMembers()) names.add(UUID.get(a));
        if(ch.getView().size() < members)
            throw new IllegalStateException("view " + names + " has fewer than " + members + " members");
        return Json.obj("view", (long)names.size(), "members", names);
    }

    Address member(String name) {
        for(Address a: ch.getView().getMembers())
            if(name.equals(UUID.get(a))) return a;
        throw new IllegalArgumentException("no member named " + name + " in " + ch.getView());
    }

    Map<String,Object> arm(Map<String,Object> cmd) {
        String role=String.valueOf(cmd.get("role"));
        if(!Arrays.asList("sender", "receiver", "both", "requester", "responder", "idle").contains(role))
            throw new IllegalArgumentException("unknown role " + role);
        Object d=cmd.get("dest");
        Address dest=d == null ? null : member(String.valueOf(d));
        int size=(int)num(cmd, "size", 1000);
        if(size < 9) throw new IllegalArgumentException("size must be >= 9 (run id, phase, round)");
        Run r=new Run((int)num(cmd, "run", 0), role, size, (int)num(cmd, "count", 0), (int)num(cmd, "warmup", 0),
                      num(cmd, "expect", 0), dest, dbl(cmd, "timeout", 120));
        run=r;
        if(r.receives() || role.equals("responder")) {
            Thread t=new Thread(() -> waitReceived(r), "perf-wait");
            t.setDaemon(true);
            if(!r.sends()) t.start();             // "both": the sending thread waits after sending
        }
        return Json.obj("run", (long)r.id);
    }

    Map<String,Object> go(Map<String,Object> cmd) {
        Run r=run;
        if(r == null || r.id != num(cmd, "run", -1)) throw new IllegalStateException("run not armed");
        Thread t;
        if(r.sends()) t=new Thread(() -> sendAll(r), "perf-sender");
        else if(r.role.equals("requester")) t=new Thread(() -> request(r), "perf-requester");
        else throw new IllegalStateException("role " + r.role + " has nothing to start");
        t.setDaemon(true);
        t.start();
        return Json.obj("run", (long)r.id);
    }

    Map<String,Object> stop(Map<String,Object> cmd) {
        Run r=run;
        if(r != null && r.id == num(cmd, "run", -1)) {
            r.stopped=true;
            r.recvDone.countDown();
            r.response.release();
        }
        return Json.obj();
    }

    // ------------------------------------------------------------------ workloads

    static byte[] payload(Run r, byte phase, int round) {
        byte[] b=new byte[r.size];
        putInt(b, 0, r.id);
        b[4]=phase;
        putInt(b, 5, round);
        return b;
    }

    static void putInt(byte[] b, int off, int v) {
        b[off]=(byte)(v >>> 24); b[off + 1]=(byte)(v >>> 16); b[off + 2]=(byte)(v >>> 8); b[off + 3]=(byte)v;
    }

    static int getInt(byte[] b, int off) {
        return ((b[off] & 0xff) << 24) | ((b[off + 1] & 0xff) << 16) | ((b[off + 2] & 0xff) << 8) | (b[off + 3] & 0xff);
    }

    void sendAll(Run r) {
        Map<String,Object> res=Json.obj("event", "result", "run", (long)r.id, "role", r.role);
        try {
            byte[] warm=payload(r, WARM, 0), meas=payload(r, MEASURED, 0);
            for(int i=0; i < r.warmup && !r.stopped; i++) ch.send(new Message(r.dest, null, warm));
            long t0=System.nanoTime();
            int n=0;
            for(; n < r.count && !r.stopped; n++) ch.send(new Message(r.dest, null, meas));
            res.put("sent", (long)n);
            res.put("send_seconds", (System.nanoTime() - t0) / 1e9);
        }
        catch(Throwable t) {
            res.put("error", "send failed: " + t);
        }
        if(r.receives()) {
            awaitReceived(r);
            addReceived(r, res);
        }
        emit(res);
    }

    void waitReceived(Run r) {
        awaitReceived(r);
        Map<String,Object> res=Json.obj("event", "result", "run", (long)r.id, "role", r.role);
        if(r.role.equals("responder")) {
            synchronized(r.lock) {res.put("answered", r.answered);}
            res.put("complete", r.answered >= r.expect);
        }
        else addReceived(r, res);
        emit(res);
    }

    static void awaitReceived(Run r) {
        try {
            r.recvDone.await((long)(r.timeout * 1000), TimeUnit.MILLISECONDS);
        }
        catch(InterruptedException ignored) {
        }
    }

    static void addReceived(Run r, Map<String,Object> res) {
        synchronized(r.lock) {
            res.put("received", r.received);
            res.put("warmup_received", r.warmReceived);
            res.put("bytes", r.bytes);
            res.put("recv_seconds", (r.lastNs - r.firstNs) / 1e9);
            res.put("complete", r.received >= r.expect);
        }
    }

    void request(Run r) {
        Map<String,Object> res=Json.obj("event", "result", "run", (long)r.id, "role", r.role);
        int total=r.warmup + r.count;
        long[] rtt=new long[r.count];
        int done=0;
        try {
            for(int i=0; i < total && !r.stopped; i++) {
                byte[] req=payload(r, REQUEST, i);
                r.waitingRound=i;
                long t0=System.nanoTime();
                ch.send(new Message(r.dest, null, req));
                if(!r.response.tryAcquire(10, TimeUnit.SECONDS)) {
                    res.put("error", "no response to request " + i + " within 10 s");
                    break;
                }
                if(r.stopped) break;
                long dt=System.nanoTime() - t0;
                if(i >= r.warmup) rtt[done++]=dt;
            }
        }
        catch(Throwable t) {
            res.put("error", "request failed: " + t);
        }
        res.put("round_trips", (long)done);
        res.put("complete", done == r.count);
        res.put("rtt", rttStats(Arrays.copyOf(rtt, done)));
        emit(res);
    }

    /** Percentiles of the round-trip times in microseconds, and a 1001-point quantile list (the CDF). */
    static Map<String,Object> rttStats(long[] ns) {
        Arrays.sort(ns);
        int n=ns.length;
        if(n == 0) return Json.obj("n", 0L);
        double sum=0;
        for(long v: ns) sum+=v;
        List<Object> cdf=new ArrayList<>(1001);
        for(int i=0; i <= 1000; i++) cdf.add(Math.round(quantile(ns, i / 1000.0) / 100.0) / 10.0);
        return Json.obj("n", (long)n, "min_us", ns[0] / 1e3, "median_us", quantile(ns, 0.5) / 1e3,
                        "p90_us", quantile(ns, 0.9) / 1e3, "p99_us", quantile(ns, 0.99) / 1e3,
                        "p999_us", quantile(ns, 0.999) / 1e3, "max_us", ns[n - 1] / 1e3,
                        "mean_us", sum / n / 1e3, "cdf_us", cdf);
    }

    /** The value at quantile q with the nearest-rank method (the same as jgpy's member). */
    static double quantile(long[] sorted, double q) {
        int n=sorted.length;
        int idx=(int)Math.ceil(q * n) - 1;
        return sorted[Math.max(0, Math.min(n - 1, idx))];
    }

    // ------------------------------------------------------------------ receiving

    final class Recv extends ReceiverAdapter {
        public void receive(Message msg) {
            Run r=run;
            if(r == null || msg.getLength() != r.size) return;
            byte[] b=msg.getRawBuffer();
            int off=msg.getOffset();
            if(getInt(b, off) != r.id) return;
            byte phase=b[off + 4];
            if(phase == MEASURED || phase == WARM) {
                if(!r.receives() || self.equals(msg.getSrc())) return;
                long now=System.nanoTime();
                synchronized(r.lock) {
                    if(phase == WARM) {
                        r.warmReceived++;
                        return;
                    }
                    if(++r.received == 1) r.firstNs=now;
                    r.lastNs=now;
                    r.bytes+=r.size;
                    if(r.received >= r.expect) r.recvDone.countDown();
                }
            }
            else if(phase == REQUEST && r.role.equals("responder")) {
                byte[] rsp=new byte[r.size];
                System.arraycopy(b, off, rsp, 0, 9);
                rsp[4]=RESPONSE;
                try {
                    ch.send(new Message(msg.getSrc(), null, rsp));
                }
                catch(Exception e) {
                    emit(Json.obj("event", "error", "error", "response failed: " + e));
                    return;
                }
                synchronized(r.lock) {
                    if(++r.answered >= r.expect) r.recvDone.countDown();
                }
            }
            else if(phase == RESPONSE && r.role.equals("requester")) {
                if(getInt(b, off + 5) == r.waitingRound) r.response.release();
            }
        }

        public void viewAccepted(View view) {
            emit(Json.obj("event", "view", "size", (long)view.size()));
        }
    }

    // ------------------------------------------------------------------ helpers

    static long num(Map<String,Object> m, String k, long dflt) {
        Object v=m.get(k);
        return v instanceof Number ? ((Number)v).longValue() : dflt;
    }

    static double dbl(Map<String,Object> m, String k, double dflt) {
        Object v=m.get(k);
        return v instanceof Number ? ((Number)v).doubleValue() : dflt;
    }
}

package org.jgpy.interop;

import org.jgroups.Address;
import org.jgroups.MergeView;
import org.jgroups.Message;
import org.jgroups.View;
import org.jgroups.util.UUID;

import java.io.File;
import java.io.FileOutputStream;
import java.io.OutputStreamWriter;
import java.io.Writer;
import java.nio.ByteBuffer;
import java.nio.charset.CharacterCodingException;
import java.nio.charset.CodingErrorAction;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.zip.CRC32C;

/**
 * The delivery journal of the Java harness node: the same rows as jgpy's (jgpy/journal.py, SCHEMA), written as
 * JSON lines that the checker converts to Parquet on ingest.
 *
 * <p>Layout: RUN_DIR/member=NAME/_journal.json (meta data) and part-NNNNN.jsonl, each written to a hidden temp
 * file and renamed when complete, by a background thread every flush interval or row group; a halted JVM loses
 * only its unwritten rows, never leaves a half-written part. Timestamps are System.nanoTime(), which is
 * CLOCK_MONOTONIC on Linux (comparable with jgpy's time.monotonic_ns() on the same host). Message ids come
 * from numbered payloads "NAME:N" (raw bytes or setObject(String)); nothing is added to the wire.</p>
 */
final class Journal {
    static final int MAX_ID_PAYLOAD=256;
    private static final Pattern ID=Pattern.compile("^(.*):([0-9]{1,18})$", Pattern.DOTALL);

    /** One event; message fields are parsed from {@code head} by the writer thread. */
    private static final class Row {
        String kind; long idx, ts; String vcoord; long vid=-1;
        List<String> members; boolean merge;
        String src, dest; int size=-1; long hash; int flags; byte[] head;
        String peer, info;
    }

    private final File dir;
    private final String member;
    private final int rowGroupSize;
    private final long flushIntervalNs;
    private final Map<String,Object> meta;
    private final Object lock=new Object();
    private List<Row> rows=new ArrayList<>();
    private long nextIdx;
    private int part;
    private volatile String vcoord;
    private volatile long vid=-1;
    private volatile boolean closed;
    private final Thread writer;

    Journal(String runDir, String member, List<String> stack, int rowGroupSize, long flushIntervalMs) throws Exception {
        if(member == null || member.isEmpty())
            throw new IllegalArgumentException("a journal needs the member's name: give connect a \"name\"");
        this.member=member;
        this.dir=new File(runDir, "member=" + escape(member));
        if(!dir.isDirectory() && !dir.mkdirs())
            throw new IllegalStateException("cannot create the journal directory " + dir);
        this.rowGroupSize=Math.max(1, rowGroupSize);
        this.flushIntervalNs=Math.max(1, flushIntervalMs) * 1_000_000L;
        String[] names=dir.list();
        if(names != null)
            for(String n: names) {
                Matcher m=Pattern.compile("^part-(\\d{5,})\\.(parquet|jsonl)$").matcher(n);
                if(m.matches()) part=Math.max(part, Integer.parseInt(m.group(1)) + 1);
            }
        List<Object> st=new ArrayList<>(stack);
        meta=Json.obj("format", "jgpy-journal", "version", 1L, "member", member, "impl", "java",
                      "impl_version", org.jgroups.Version.description, "pid", ProcessHandle.current().pid(),
                      "stack", st, "clock", "CLOCK_MONOTONIC", "start_ns", System.nanoTime(), "parts", null,
                      "closed", false);
        writeMeta();
        other("open", null, Json.write(Json.obj("impl", "java", "impl_version", org.jgroups.Version.description,
                                                "pid", ProcessHandle.current().pid(), "stack", st)));
        writer=new Thread(this::run, "journal-" + member);
        writer.setDaemon(true);
        writer.start();
    }

    static String escape(String name) {
        StringBuilder sb=new StringBuilder();
        for(byte b: name.getBytes(StandardCharsets.UTF_8)) {
            char c=(char)(b & 0xff);
            if((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || ".-_@+ ".indexOf(c) >= 0)
                sb.append(c);
            else sb.append(String.format("%%%02X", b & 0xff));
        }
        return sb.toString();
    }

    static String name(Address a) {
        if(a == null) return null;
        String n=UUID.get(a);
        return n != null ? n : a.toString();
    }

    private void add(Row r) {
        synchronized(lock) {
            r.idx=nextIdx++;
            rows.add(r);
        }
    }

    // ------------------------------------------------------------------ recording (any thread)

    void view(View v) {
        Row r=new Row();
        r.kind="view"; r.ts=System.nanoTime();
        vcoord=name(v.getVid().getCoordAddress());
        vid=v.getVid().getId();
        r.vcoord=vcoord; r.vid=vid;
        r.members=new ArrayList<>();
        for(Address a: v.getMembers()) r.members.add(name(a));
        r.merge=v instanceof MergeView;
        add(r);
    }

    void send(Message msg)    {message("send", msg);}
    void deliver(Message msg) {message("deliver", msg);}

    private void message(String kind, Message msg) {
        Row r=new Row();
        r.ts=System.nanoTime();
        r.kind=kind; r.vcoord=vcoord; r.vid=vid;
        r.src=msg.getSrc() != null ? name(msg.getSrc()) : member;     // a send: src is set by the channel later
        r.dest=name(msg.getDest());
        r.flags=msg.getFlags() & 0xff;
        byte[] buf=msg.getRawBuffer();
        int off=msg.getOffset(), len=msg.getLength();
        r.size=buf == null ? 0 : len;
        if(buf != null) {
            CRC32C crc=new CRC32C();
            crc.update(buf, off, len);
            r.hash=crc.getValue();
            if(len <= MAX_ID_PAYLOAD) r.head=Arrays.copyOfRange(buf, off, off + len);
        }
        add(r);
    }

    void other(String kind, Address peer, String info) {
        Row r=new Row();
        r.ts=System.nanoTime();
        r.kind=kind; r.vcoord=vcoord; r.vid=vid;
        r.peer=name(peer); r.info=info;
        add(r);
    }

    // ------------------------------------------------------------------ writing

    private void run() {
        long last=System.nanoTime();
        while(!closed) {
            try {Thread.sleep(Math.min(200, flushIntervalNs / 1_000_000L));}
            catch(InterruptedException e) {break;}
            int n;
            synchronized(lock) {n=rows.size();}
            if(n >= rowGroupSize || (n > 0 && System.nanoTime() - last >= flushIntervalNs)) {
                flush();
                last=System.nanoTime();
            }
        }
    }

    synchronized void flush() {
        List<Row> batch;
        synchronized(lock) {
            batch=rows;
            rows=new ArrayList<>();
        }
        for(int from=0; from < batch.size(); from+=rowGroupSize) {
            List<Row> sub=batch.subList(from, Math.min(batch.size(), from + rowGroupSize));
            try {
                writePart(sub);
            }
            catch(Throwable t) {
                System.err.println("journal " + dir + ": " + sub.size() + " rows lost: " + t);
            }
        }
    }

    private void writePart(List<Row> batch) throws Exception {
        String name=String.format("part-%05d.jsonl", part);
        File tmp=new File(dir, "." + name + ".tmp");
        StringBuilder sb=new StringBuilder(256);
        try(Writer w=new OutputStreamWriter(new FileOutputStream(tmp), StandardCharsets.UTF_8)) {
            for(Row r: batch) {
                sb.setLength(0);
                line(r, sb);
                w.write(sb.toString());
            }
        }
        Files.move(tmp.toPath(), new File(dir, name).toPath(), StandardCopyOption.ATOMIC_MOVE,
                   StandardCopyOption.REPLACE_EXISTING);
        part++;
    }

    private static void field(StringBuilder sb, String k, String v) {
        sb.append(",\"").append(k).append("\":");
        if(v == null) sb.append("null");
        else Json.quote(v, sb);
    }

    private static void line(Row r, StringBuilder sb) {
        sb.append("{\"kind\":\"").append(r.kind).append("\",\"idx\":").append(r.idx).append(",\"ts_ns\":").append(r.ts);
        field(sb, "view_coord", r.vcoord);
        sb.append(",\"view_id\":").append(r.vid < 0 && r.vcoord == null ? "null" : Long.toString(r.vid));
        if(r.members != null) {
            sb.append(",\"members\":[");
            for(int i=0; i < r.members.size(); i++) {
                if(i > 0) sb.append(',');
                Json.quote(r.members.get(i), sb);
            }
            sb.append("],\"merge\":").append(r.merge);
        }
        if(r.size >= 0) {
            String sender=r.src;
            Long seq=null;
            if(r.head != null) {
                String[] id=parseId(r.head);
                if(id != null) {sender=id[0]; seq=Long.parseLong(id[1]);}
            }
            field(sb, "sender", sender);
            sb.append(",\"seq\":").append(seq == null ? "null" : seq.toString());
            field(sb, "dest", r.dest);
            sb.append(",\"size\":").append(r.size).append(",\"hash\":").append(r.hash).append(",\"flags\":").append(r.flags);
        }
        if(r.peer != null) field(sb, "peer", r.peer);
        if(r.info != null) field(sb, "info", r.info);
        sb.append("}\n");
    }

    /** [name, n] of a numbered payload, as jgpy.journal.parse_ids: an optional 0x12 (String tag), NAME:N. */
    static String[] parseId(byte[] p) {
        int off=p.length > 0 && p[0] == 0x12 ? 1 : 0;
        byte[] body=Arrays.copyOfRange(p, off, p.length);
        Matcher m=ID.matcher(new String(body, StandardCharsets.ISO_8859_1));
        if(!m.matches()) return null;
        byte[] nameBytes=Arrays.copyOfRange(body, 0, m.end(1));
        String name;
        try {   // UTF-8 when valid (a raw UTF-8 name), else the low bytes (Java's setObject(String) keeps those)
            name=StandardCharsets.UTF_8.newDecoder().onMalformedInput(CodingErrorAction.REPORT)
              .onUnmappableCharacter(CodingErrorAction.REPORT).decode(ByteBuffer.wrap(nameBytes)).toString();
        }
        catch(CharacterCodingException e) {
            name=new String(nameBytes, StandardCharsets.ISO_8859_1);
        }
        return new String[]{name, m.group(2)};
    }

    private void writeMeta() throws Exception {
        File tmp=new File(dir, "._journal.json.tmp");
        Files.write(tmp.toPath(), Json.write(meta).getBytes(StandardCharsets.UTF_8));
        Files.move(tmp.toPath(), new File(dir, "_journal.json").toPath(), StandardCopyOption.ATOMIC_MOVE,
                   StandardCopyOption.REPLACE_EXISTING);
    }

    /** A clean end: a close row, everything written, the meta data marked closed. */
    void close() {
        if(closed) return;
        other("close", null, null);
        closed=true;
        writer.interrupt();
        try {writer.join(30000);} catch(InterruptedException ignored) {}
        flush();
        meta.put("parts", (long)part);
        meta.put("closed", true);
        meta.put("end_ns", System.nanoTime());
        try {writeMeta();}
        catch(Exception e) {System.err.println("journal " + dir + ": cannot write the meta data: " + e);}
    }

    String directory() {return dir.getPath();}
}

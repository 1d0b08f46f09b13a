package org.jgpy.interop;

import org.jgroups.Message;
import org.jgroups.protocols.TpHeader;
import org.jgroups.protocols.pbcast.NakAckHeader;
import org.jgroups.util.ExposedByteArrayOutputStream;
import org.jgroups.util.UUID;

import java.io.ByteArrayInputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * Micro-benchmark of the JGroups 2.12 wire codec, the reference figures for jgpy's own codec.
 *
 * <pre>
 * java -cp interop/build/classes:/usr/share/java/jgroups.jar org.jgpy.interop.CodecBench [--seconds S] [--warmup W] [--hex]
 * </pre>
 *
 * Cases: one 1 KB multicast data message as a single datagram (TP.writeMessage; decode = version short + flags
 * byte + Message.readFrom), and a 64-message multicast bundle (TP.writeMessageList / TP.readMessageList).
 * Output: one JSON line on stdout. {@code --hex} prints the two datagrams instead, so that another implementation
 * can check it builds the identical bytes.
 */
public final class CodecBench {
    static final long MSB=0x0123456789abcdefL, LSB=0x0fedcba987654321L;
    static final short NAKACK_ID=15, UDP_ID=21;
    static final int PAYLOAD=1024, BUNDLE=64;

    /** Blackhole: everything measured feeds this, and it is printed to stderr at the end. */
    static volatile long sink;

    public static void main(String[] args) throws Exception {
        double seconds=3.0, warmup=2.0;
        boolean hex=false;
        for(int i=0; i < args.length; i++) {
            switch(args[i]) {
                case "--seconds": seconds=Double.parseDouble(args[++i]); break;
                case "--warmup":  warmup=Double.parseDouble(args[++i]); break;
                case "--hex":     hex=true; break;
                default:
                    System.err.println("usage: CodecBench [--seconds S] [--warmup W] [--hex]");
                    System.exit(2);
            }
        }
        if(hex) {
            System.out.println(Json.write(Json.obj("single_hex", Json.hex(encodeSingle()), "bundle_hex", Json.hex(encodeBundle()))));
            return;
        }
        Map<String,Object> results=run(seconds, warmup);
        System.out.println(Json.write(Json.obj("java", System.getProperty("java.version"), "results", results)));
        System.err.println("CodecBench checksum: " + sink);
    }

    static Message message(long seqno) {
        byte[] payload=new byte[PAYLOAD];
        for(int i=0; i < payload.length; i++) payload[i]=(byte)(i & 0xff);
        Message msg=new Message(null, new UUID(MSB, LSB), payload);
        msg.putHeader(NAKACK_ID, NakAckHeader.createMessageHeader(seqno));
        msg.putHeader(UDP_ID, new TpHeader("bench"));
        return msg;
    }

    static List<Message> bundle() {
        List<Message> l=new ArrayList<>(BUNDLE);
        for(int k=0; k < BUNDLE; k++) l.add(message(k + 1));
        return l;
    }

    static byte[] encodeSingle() throws Exception {
        ExposedByteArrayOutputStream out=new ExposedByteArrayOutputStream(2048);
        DataOutputStream dos=new DataOutputStream(out);
        Codec.writeMessage(message(1), dos, true);
        dos.flush();
        return out.toByteArray();
    }

    static byte[] encodeBundle() throws Exception {
        ExposedByteArrayOutputStream out=new ExposedByteArrayOutputStream(BUNDLE * 1200);
        DataOutputStream dos=new DataOutputStream(out);
        List<Message> msgs=bundle();
        Codec.writeMessageList(null, msgs.get(0).getSrc(), msgs, dos, true);
        dos.flush();
        return out.toByteArray();
    }

    /** One benchmark case; runBatch runs the operation n times in its own (monomorphic) loop. */
    interface Case {void runBatch(int n) throws Exception;}

    static final class EncodeSingle implements Case {
        final Message msg=message(1);
        final ExposedByteArrayOutputStream out=new ExposedByteArrayOutputStream(2048);
        final DataOutputStream dos=new DataOutputStream(out);
        public void runBatch(int n) throws Exception {
            long acc=0;
            for(int i=0; i < n; i++) {
                out.reset();
                Codec.writeMessage(msg, dos, true);
                acc+=out.size() + out.getRawBuffer()[out.size() - 1];
            }
            sink+=acc;
        }
    }

    static final class DecodeSingle implements Case {
        final byte[] data;
        DecodeSingle(byte[] data) {this.data=data;}
        public void runBatch(int n) throws Exception {
            long acc=0;
            for(int i=0; i < n; i++) {
                DataInputStream in=new DataInputStream(new ByteArrayInputStream(data));
                acc+=in.readShort();
                acc+=in.readByte();
                Message msg=new Message(false);
                msg.readFrom(in);
                acc+=msg.getLength() + msg.getNumHeaders() + msg.getRawBuffer()[100];
            }
            sink+=acc;
        }
    }

    static final class EncodeBundle implements Case {
        final List<Message> msgs=bundle();
        final ExposedByteArrayOutputStream out=new ExposedByteArrayOutputStream(BUNDLE * 1200);
        final DataOutputStream dos=new DataOutputStream(out);
        public void runBatch(int n) throws Exception {
            long acc=0;
            for(int i=0; i < n; i++) {
                out.reset();
                Codec.writeMessageList(null, msgs.get(0).getSrc(), msgs, dos, true);
                acc+=out.size() + out.getRawBuffer()[out.size() - 2];
            }
            sink+=acc;
        }
    }

    static final class DecodeBundle implements Case {
        final byte[] data;
        DecodeBundle(byte[] data) {this.data=data;}
        public void runBatch(int n) throws Exception {
            long acc=0;
            for(int i=0; i < n; i++) {
                DataInputStream in=new DataInputStream(new ByteArrayInputStream(data));
                acc+=in.readShort();
                acc+=in.readByte();
                List<Message> l=Codec.readMessageList(in);
                acc+=l.size() + l.get(l.size() - 1).getLength();
            }
            sink+=acc;
        }
    }

    /** Warm up for warmupSec, then time batches for seconds; returns ns per operation. */
    static double measure(Case c, double warmupSec, double seconds) throws Exception {
        int batch=256;
        long wEnd=System.nanoTime() + (long)(warmupSec * 1e9);
        do {
            long t0=System.nanoTime();
            c.runBatch(batch);
            long dt=System.nanoTime() - t0;
            if(dt < 5_000_000L && batch < (1 << 24)) batch*=2; // aim for batches of >= ~5 ms
        }
        while(System.nanoTime() < wEnd);
        long total=0, ops=0, budget=(long)(seconds * 1e9);
        while(total < budget) {
            long t0=System.nanoTime();
            c.runBatch(batch);
            total+=System.nanoTime() - t0;
            ops+=batch;
        }
        return (double)total / ops;
    }

    static double round1(double d) {return Math.round(d * 10.0) / 10.0;}

    static Map<String,Object> run(double seconds, double warmup) throws Exception {
        byte[] single=encodeSingle(), bundle=encodeBundle();
        Map<String,Object> r=new LinkedHashMap<>();
        r.put("encode_1k", round1(measure(new EncodeSingle(), warmup, seconds)));
        r.put("decode_1k", round1(measure(new DecodeSingle(single), warmup, seconds)));
        r.put("encode_bundle64", round1(measure(new EncodeBundle(), warmup, seconds)));
        r.put("decode_bundle64", round1(measure(new DecodeBundle(bundle), warmup, seconds)));
        r.put("encode_1k_bytes", single.length);
        r.put("bundle64_bytes", bundle.length);
        return r;
    }
}

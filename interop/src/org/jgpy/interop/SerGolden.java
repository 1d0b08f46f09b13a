package org.jgpy.interop;

import org.jgroups.blocks.MethodCall;

import java.io.BufferedReader;
import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStreamReader;
import java.io.ObjectInputStream;
import java.io.ObjectOutputStream;
import java.lang.reflect.Array;
import java.lang.reflect.Field;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Hashtable;
import java.util.LinkedHashMap;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.Vector;

/**
 * Java serialization goldens for jgpy's writer ({@code jgpy/javaser_write.py}, {@code tests/test_javaser_write.py}).
 *
 * <p>{@code golden}: one line per case, {@code name hex}, the bytes {@code ObjectOutputStream.writeObject} gives
 * for a fixed value. Then, for every line read from stdin ({@code hex}), one line: {@code ok <description>} of
 * the object {@code ObjectInputStream} reads from those bytes (Java reads ours), or {@code err <exception>}.</p>
 */
public final class SerGolden {

    static Map<String,Object> cases() throws Exception {
        Map<String,Object> c=new LinkedHashMap<>();
        c.put("null", null);
        c.put("string", "hello");
        c.put("string_unicode", "h\u00e9llo \u20ac \ud83d\ude00 \u0000");
        StringBuilder sb=new StringBuilder();
        for(int i=0; i < 70000; i++) sb.append((char)('a' + i % 26));
        c.put("string_long", sb.toString());
        c.put("integer", 42);
        c.put("integer_neg", -100000);
        c.put("long", 1234567890123L);
        c.put("short", (short)-7);
        c.put("byte", (byte)5);
        c.put("float", 1.5f);
        c.put("double", -2.25);
        c.put("boolean", true);
        c.put("character", '\u00e9');
        c.put("bytes", new byte[]{1, 2, -3});
        c.put("ints", new int[]{1, -2, 300000});
        c.put("longs", new long[]{1L, -2L});
        c.put("objects", new Object[]{1, "a", null, 1, "a"});
        c.put("strings", new String[]{"a", "b", "a"});
        c.put("arraylist", new ArrayList<Object>(Arrays.asList(1, "x", 2L)));
        c.put("arraylist_empty", new ArrayList<Object>());
        HashMap<Object,Object> hm=new HashMap<>(); hm.put("k", 7);
        c.put("hashmap", hm);
        Hashtable<Object,Object> ht=new Hashtable<>(); ht.put("k", 7);
        c.put("hashtable", ht);
        c.put("linkedlist", new LinkedList<Object>(Arrays.asList(1, 2)));
        c.put("vector", new Vector<Object>(Arrays.asList(1, "x")).clone());    // DistributedQueue's state
        c.put("vector_empty", new Vector<Object>().clone());
        HashSet<Object> hs=new HashSet<>(); hs.add("s");
        c.put("hashset", hs);
        TreeMap<Object,Object> tm=new TreeMap<>(); tm.put("a", 1); tm.put("b", 2);
        c.put("treemap", tm);
        List<Object> nested=new ArrayList<>();
        nested.add(new ArrayList<Object>(Arrays.asList("in", 1000)));
        nested.add(hm);
        nested.add(new byte[]{9});
        c.put("nested", nested);
        RuntimeException cause=new IllegalStateException("inner");
        cause.setStackTrace(new StackTraceElement[0]);
        RuntimeException ex=new RuntimeException("boom", cause);
        ex.setStackTrace(new StackTraceElement[]{new StackTraceElement("pkg.Mod", "fn", "mod.py", 12),
          new StackTraceElement("pkg.Other", "<module>", null, -1)});
        c.put("exception", ex);
        Exception plain=new Exception("plain");
        plain.setStackTrace(new StackTraceElement[0]);
        c.put("exception_nocause", plain);
        c.put("mc_old", new MethodCall("ping", new Object[]{1, "a"}));
        c.put("mc_types", new MethodCall("add", new Object[]{1, 2L}, new Class[]{int.class, Long.class}));
        c.put("mc_signature", new MethodCall("echo", new Object[]{"x"}, new String[]{"java.lang.String"}));
        c.put("mc_id", new MethodCall((short)3, new Object[]{}));
        // the RPC benchmark's call and the fast writer's shapes: byte[], shared small boxes and strings, a Long,
        // a Boolean and a Double among the arguments, a String[] of types
        c.put("mc_echo_bytes", new MethodCall("echoBytes", new Object[]{new byte[100]}, new Class[]{byte[].class}));
        c.put("mc_mixed", new MethodCall("mix", new Object[]{5, "s", 5, "s", 100000, 7L, true, 0.5, null,
                new byte[]{1}, new Object[]{5, "s"}}, new Class[]{int.class, String.class, Integer.class,
                String.class, int.class, long.class, boolean.class, double.class, String.class, byte[].class,
                Object[].class}));
        c.put("mc_signature_ids", new MethodCall("put", new Object[]{"k", new byte[]{7}, 3},
                new String[]{"java.lang.String", "[B", "int"}));
        c.put("mc_method", new MethodCall(SerGolden.class.getDeclaredMethod("sample", String.class, int.class),
                                          new Object[]{"s", 4}));
        java.lang.reflect.Constructor<?> info=Class.forName("org.jgroups.blocks.NotificationBus$Info")
          .getDeclaredConstructor(int.class, java.io.Serializable.class);
        info.setAccessible(true);
        c.put("notification_info", info.newInstance(1, "hi"));
        return c;
    }

    /** A method for the METHOD mode golden. */
    public static String sample(String s, int n) { return s + n; }

    static byte[] serialize(Object o) throws Exception {
        ByteArrayOutputStream bos=new ByteArrayOutputStream();
        ObjectOutputStream out=new ObjectOutputStream(bos);
        out.writeObject(o);
        out.close();
        return bos.toByteArray();
    }

    /** A canonical description (the Python test builds the same string from the value it wrote). */
    static String describe(Object o) throws Exception {
        if(o == null) return "null";
        if(o instanceof String) return "String(" + escape((String)o) + ")";
        if(o instanceof Character) return "Character(" + (int)(Character)o + ")";
        if(o instanceof Number || o instanceof Boolean) return o.getClass().getSimpleName() + "(" + o + ")";
        if(o instanceof Class) return "Class(" + ((Class<?>)o).getName() + ")";
        if(o.getClass().isArray()) {
            StringBuilder sb=new StringBuilder(o.getClass().getName()).append('[');
            for(int i=0; i < Array.getLength(o); i++) {
                if(i > 0) sb.append(',');
                sb.append(describe(Array.get(o, i)));
            }
            return sb.append(']').toString();
        }
        if(o instanceof Map) {
            List<String> entries=new ArrayList<>();
            for(Map.Entry<?,?> e: ((Map<?,?>)o).entrySet())
                entries.add(describe(e.getKey()) + "=" + describe(e.getValue()));
            java.util.Collections.sort(entries);
            return o.getClass().getName() + "{" + String.join(",", entries) + "}";
        }
        if(o instanceof java.util.Set) {
            List<String> items=new ArrayList<>();
            for(Object x: (java.util.Set<?>)o) items.add(describe(x));
            java.util.Collections.sort(items);
            return o.getClass().getName() + "{" + String.join(",", items) + "}";
        }
        if(o instanceof java.util.Collection) {
            List<String> items=new ArrayList<>();
            for(Object x: (java.util.Collection<?>)o) items.add(describe(x));
            return o.getClass().getName() + "[" + String.join(",", items) + "]";
        }
        if(o instanceof Throwable) {
            Throwable t=(Throwable)o;
            StringBuilder sb=new StringBuilder(t.getClass().getName()).append('(');
            sb.append(t.getMessage() == null? "null" : escape(t.getMessage())).append(";trace=");
            for(StackTraceElement e: t.getStackTrace())
                sb.append(e.getClassName()).append('.').append(e.getMethodName()).append('@')
                  .append(e.getFileName()).append(':').append(e.getLineNumber()).append(' ');
            sb.append(";cause=").append(t.getCause() == null? "null" : describe(t.getCause()));
            return sb.append(')').toString();
        }
        if(o instanceof MethodCall) {
            MethodCall mc=(MethodCall)o;
            StringBuilder sb=new StringBuilder("MethodCall(mode=").append(mc.getMode()).append(",name=")
              .append(mc.getName()).append(",id=").append(mc.getId()).append(",args=")
              .append(describe(mc.getArgs()));
            Field types=MethodCall.class.getDeclaredField("types");
            types.setAccessible(true);
            Field sig=MethodCall.class.getDeclaredField("signature");
            sig.setAccessible(true);
            sb.append(",types=").append(describe(types.get(mc))).append(",signature=").append(describe(sig.get(mc)));
            sb.append(",method=").append(mc.getMethod() == null? "null" : mc.getMethod().toString());
            return sb.append(')').toString();
        }
        return o.getClass().getName() + "<" + o + ">";
    }

    static String escape(String s) {
        StringBuilder sb=new StringBuilder();
        for(char ch: s.toCharArray()) {
            if(ch >= 0x20 && ch < 0x7f && ch != '\\') sb.append(ch);
            else sb.append(String.format("\\u%04x", (int)ch));
        }
        return sb.toString();
    }

    static String hex(byte[] b) {
        StringBuilder sb=new StringBuilder(b.length * 2);
        for(byte x: b) sb.append(String.format("%02x", x & 0xff));
        return sb.toString();
    }

    static byte[] unhex(String s) {
        byte[] b=new byte[s.length() / 2];
        for(int i=0; i < b.length; i++) b[i]=(byte)Integer.parseInt(s.substring(2 * i, 2 * i + 2), 16);
        return b;
    }

    public static void main(String[] args) throws Exception {
        StringBuilder out=new StringBuilder();
        for(Map.Entry<String,Object> e: cases().entrySet())
            out.append(e.getKey()).append(' ').append(hex(serialize(e.getValue()))).append('\n');
        out.append("end\n");
        System.out.print(out);
        System.out.flush();
        BufferedReader in=new BufferedReader(new InputStreamReader(System.in, StandardCharsets.US_ASCII));
        String line;
        while((line=in.readLine()) != null) {
            line=line.trim();
            if(line.isEmpty()) continue;
            String result;
            try {
                ObjectInputStream ois=new ObjectInputStream(new ByteArrayInputStream(unhex(line)));
                result="ok " + describe(ois.readObject());
            }
            catch(Throwable t) {
                result="err " + t;
            }
            System.out.println(result);
            System.out.flush();
        }
    }
}

package org.jgpy.interop;

import java.math.BigInteger;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A small, self-contained JSON reader/writer for the interop harness.
 *
 * <p>Mapping: object = {@link LinkedHashMap} (keys in document order; a JSON null value is stored as a Java null,
 * so {@code containsKey} tells "absent" from "null"), array = {@link ArrayList}, string = {@link String},
 * true/false = {@link Boolean}, integer = {@link Long} (or {@link BigInteger} outside the long range; never
 * through double), any number with a fraction or exponent = {@link Num} (keeps the literal text so that
 * Float/Double conversions are rounded once, by the JDK's own parser).</p>
 *
 * <p>The writer emits pure ASCII: every char outside 0x20..0x7e is written as a {@code \\uXXXX} escape
 * (UTF-16 code units, so lone surrogates survive).</p>
 */
final class Json {
    private Json() {}

    /** A non-integer JSON number, kept as its literal text. */
    static final class Num extends Number {
        private static final long serialVersionUID=1L;
        final String text;
        Num(String text) {this.text=text;}
        public double doubleValue() {return Double.parseDouble(text);}
        public float  floatValue()  {return Float.parseFloat(text);}
        public long   longValue()   {return (long)doubleValue();}
        public int    intValue()    {return (int)doubleValue();}
        public String toString()    {return text;}
    }

    /** A pre-rendered JSON fragment, written verbatim. */
    static final class Raw {
        final String text;
        Raw(String text) {this.text=text;}
        public String toString() {return text;}
    }

    // ------------------------------------------------------------------ parsing

    static Object parse(String s) {
        Parser p=new Parser(s);
        p.ws();
        Object v=p.value();
        p.ws();
        if(p.pos != s.length())
            throw p.err("trailing characters");
        return v;
    }

    private static final class Parser {
        final String s;
        int pos;
        Parser(String s) {this.s=s;}

        IllegalArgumentException err(String msg) {
            return new IllegalArgumentException("JSON: " + msg + " at offset " + pos);
        }

        void ws() {
            while(pos < s.length()) {
                char c=s.charAt(pos);
                if(c == ' ' || c == '\t' || c == '\n' || c == '\r') pos++;
                else break;
            }
        }

        Object value() {
            if(pos >= s.length()) throw err("unexpected end");
            char c=s.charAt(pos);
            switch(c) {
                case '{': return object();
                case '[': return array();
                case '"': return string();
                case 't': literal("true");  return Boolean.TRUE;
                case 'f': literal("false"); return Boolean.FALSE;
                case 'n': literal("null");  return null;
                default:
                    if(c == '-' || (c >= '0' && c <= '9')) return number();
                    throw err("unexpected character '" + c + "'");
            }
        }

        void literal(String lit) {
            if(!s.startsWith(lit, pos)) throw err("expected " + lit);
            pos+=lit.length();
        }

        Map<String,Object> object() {
            Map<String,Object> m=new LinkedHashMap<>();
            pos++; // {
            ws();
            if(pos < s.length() && s.charAt(pos) == '}') {pos++; return m;}
            while(true) {
                ws();
                if(pos >= s.length() || s.charAt(pos) != '"') throw err("expected string key");
                String k=string();
                ws();
                if(pos >= s.length() || s.charAt(pos) != ':') throw err("expected ':'");
                pos++;
                ws();
                m.put(k, value());
                ws();
                if(pos >= s.length()) throw err("unexpected end in object");
                char c=s.charAt(pos++);
                if(c == ',') continue;
                if(c == '}') return m;
                pos--;
                throw err("expected ',' or '}'");
            }
        }

        List<Object> array() {
            List<Object> l=new ArrayList<>();
            pos++; // [
            ws();
            if(pos < s.length() && s.charAt(pos) == ']') {pos++; return l;}
            while(true) {
                ws();
                l.add(value());
                ws();
                if(pos >= s.length()) throw err("unexpected end in array");
                char c=s.charAt(pos++);
                if(c == ',') continue;
                if(c == ']') return l;
                pos--;
                throw err("expected ',' or ']'");
            }
        }

        String string() {
            pos++; // "
            StringBuilder sb=new StringBuilder();
            while(true) {
                if(pos >= s.length()) throw err("unterminated string");
                char c=s.charAt(pos++);
                if(c == '"') return sb.toString();
                if(c != '\\') {
                    if(c < 0x20) throw err("control character in string");
                    sb.append(c);
                    continue;
                }
                if(pos >= s.length()) throw err("unterminated escape");
                char e=s.charAt(pos++);
                switch(e) {
                    case '"':  sb.append('"'); break;
                    case '\\': sb.append('\\'); break;
                    case '/':  sb.append('/'); break;
                    case 'b':  sb.append('\b'); break;
                    case 'f':  sb.append('\f'); break;
                    case 'n':  sb.append('\n'); break;
                    case 'r':  sb.append('\r'); break;
                    case 't':  sb.append('\t'); break;
                    case 'u':
                        if(pos + 4 > s.length()) throw err("short \\u escape");
                        int cp=0;
                        for(int i=0; i < 4; i++) {
                            int d=Character.digit(s.charAt(pos++), 16);
                            if(d < 0) throw err("bad hex digit in \\u escape");
                            cp=(cp << 4) | d;
                        }
                        sb.append((char)cp); // UTF-16 code unit: surrogate pairs and lone surrogates pass as they are
                        break;
                    default: throw err("bad escape \\" + e);
                }
            }
        }

        Object number() {
            int start=pos;
            boolean integral=true;
            if(s.charAt(pos) == '-') pos++;
            int digits=pos;
            while(pos < s.length() && Character.isDigit(s.charAt(pos))) pos++;
            if(pos == digits) throw err("bad number");
            if(pos < s.length() && s.charAt(pos) == '.') {
                integral=false; pos++;
                int fd=pos;
                while(pos < s.length() && Character.isDigit(s.charAt(pos))) pos++;
                if(pos == fd) throw err("bad fraction");
            }
            if(pos < s.length() && (s.charAt(pos) == 'e' || s.charAt(pos) == 'E')) {
                integral=false; pos++;
                if(pos < s.length() && (s.charAt(pos) == '+' || s.charAt(pos) == '-')) pos++;
                int ed=pos;
                while(pos < s.length() && Character.isDigit(s.charAt(pos))) pos++;
                if(pos == ed) throw err("bad exponent");
            }
            String text=s.substring(start, pos);
            if(!integral)
                return new Num(text);
            BigInteger bi=new BigInteger(text);
            if(bi.bitLength() < 64)
                return bi.longValue();
            return bi;
        }
    }

    // ------------------------------------------------------------------ writing

    static String write(Object v) {
        StringBuilder sb=new StringBuilder(128);
        write(v, sb);
        return sb.toString();
    }

    @SuppressWarnings("unchecked")
    static void write(Object v, StringBuilder sb) {
        if(v == null) {sb.append("null"); return;}
        if(v instanceof String) {quote((String)v, sb); return;}
        if(v instanceof Boolean) {sb.append(((Boolean)v) ? "true" : "false"); return;}
        if(v instanceof Long || v instanceof Integer || v instanceof Short || v instanceof Byte || v instanceof BigInteger) {
            sb.append(v.toString()); return;
        }
        if(v instanceof Double || v instanceof Float) {
            double d=((Number)v).doubleValue();
            if(Double.isNaN(d) || Double.isInfinite(d)) quote(Double.toString(d), sb); // "NaN", "Infinity", "-Infinity"
            else sb.append(Double.toString(d));
            return;
        }
        if(v instanceof Num || v instanceof Raw) {sb.append(v.toString()); return;}
        if(v instanceof Character) {quote(String.valueOf((char)(Character)v), sb); return;}
        if(v instanceof Map) {
            sb.append('{');
            boolean first=true;
            for(Map.Entry<String,Object> e: ((Map<String,Object>)v).entrySet()) {
                if(!first) sb.append(',');
                first=false;
                quote(e.getKey(), sb);
                sb.append(':');
                write(e.getValue(), sb);
            }
            sb.append('}');
            return;
        }
        if(v instanceof List) {
            sb.append('[');
            boolean first=true;
            for(Object o: (List<Object>)v) {
                if(!first) sb.append(',');
                first=false;
                write(o, sb);
            }
            sb.append(']');
            return;
        }
        if(v instanceof Object[]) {
            sb.append('[');
            Object[] a=(Object[])v;
            for(int i=0; i < a.length; i++) {
                if(i > 0) sb.append(',');
                write(a[i], sb);
            }
            sb.append(']');
            return;
        }
        throw new IllegalArgumentException("cannot write " + v.getClass().getName() + " as JSON");
    }

    private static final char[] HEXD="0123456789abcdef".toCharArray();

    static void quote(String s, StringBuilder sb) {
        sb.append('"');
        for(int i=0; i < s.length(); i++) {
            char c=s.charAt(i);
            switch(c) {
                case '"':  sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                case '\b': sb.append("\\b"); break;
                case '\f': sb.append("\\f"); break;
                default:
                    if(c < 0x20 || c > 0x7e) {
                        sb.append("\\u").append(HEXD[(c >> 12) & 0xf]).append(HEXD[(c >> 8) & 0xf])
                          .append(HEXD[(c >> 4) & 0xf]).append(HEXD[c & 0xf]);
                    }
                    else
                        sb.append(c);
            }
        }
        sb.append('"');
    }

    // ------------------------------------------------------------------ small helpers

    static Map<String,Object> obj(Object... kv) {
        Map<String,Object> m=new LinkedHashMap<>();
        for(int i=0; i < kv.length; i+=2)
            m.put((String)kv[i], kv[i + 1]);
        return m;
    }

    static String hex(byte[] b) {
        return b == null ? null : hex(b, 0, b.length);
    }

    static String hex(byte[] b, int off, int len) {
        char[] out=new char[len * 2];
        for(int i=0; i < len; i++) {
            int x=b[off + i] & 0xff;
            out[2 * i]=HEXD[x >> 4];
            out[2 * i + 1]=HEXD[x & 0xf];
        }
        return new String(out);
    }

    static byte[] unhex(String s) {
        if(s == null) return null;
        if((s.length() & 1) != 0) throw new IllegalArgumentException("hex string of odd length " + s.length());
        byte[] out=new byte[s.length() / 2];
        for(int i=0; i < out.length; i++) {
            int hi=Character.digit(s.charAt(2 * i), 16), lo=Character.digit(s.charAt(2 * i + 1), 16);
            if(hi < 0 || lo < 0) throw new IllegalArgumentException("bad hex digit near offset " + (2 * i));
            out[i]=(byte)((hi << 4) | lo);
        }
        return out;
    }
}

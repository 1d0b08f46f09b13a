package org.jgpy.interop;

import java.io.BufferedReader;
import java.io.FileDescriptor;
import java.io.FileOutputStream;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.Map;

/**
 * The command loop of RpcNode and MapNode: JSON commands on stdin, one reply each ({@code ok}, {@code reply}
 * id) and events on stdout, everything else printed goes to stderr. {@code exit} (or end of input) ends it.
 */
final class JsonLines {
    interface Handler {
        Map<String,Object> run(Map<String,Object> cmd) throws Exception;
    }

    private static PrintStream out;

    private JsonLines() {}

    /** Takes stdout for protocol lines (System.out goes to stderr from now on) and says {@code ready}. */
    static void open() throws Exception {
        out=new PrintStream(new FileOutputStream(FileDescriptor.out), true, "US-ASCII");
        System.setOut(System.err);
        emit(Json.obj("event", "ready"));
    }

    static synchronized void emit(Map<String,Object> m) {
        out.println(Json.write(m));
        out.flush();
    }

    /** Runs every command with {@code handler}, each on a thread of its own if {@code threaded}. */
    static void serve(Handler handler, boolean threaded) throws Exception {
        BufferedReader in=new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        String line;
        while((line=in.readLine()) != null) {
            if(line.trim().isEmpty()) continue;
            @SuppressWarnings("unchecked")
            final Map<String,Object> cmd=(Map<String,Object>)Json.parse(line);
            final Object id=cmd.get("id");
            if("exit".equals(cmd.get("cmd"))) {
                emit(Json.obj("reply", id, "ok", true));
                return;
            }
            Runnable one=() -> {
                Map<String,Object> rep;
                try {
                    rep=handler.run(cmd);
                    rep.put("ok", true);
                }
                catch(Throwable e) {
                    rep=Json.obj("ok", false, "error", String.valueOf(e));
                }
                rep.put("reply", id);
                emit(rep);
            };
            if(threaded) {
                Thread t=new Thread(one, "jsonlines-cmd");
                t.setDaemon(true);
                t.start();
            }
            else
                one.run();
        }
    }
}

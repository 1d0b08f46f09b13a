package org.jgpy.interop;

import org.jgroups.blocks.ReplicatedHashMap;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;

/**
 * A JGroups 2.12.2 member sharing a {@link ReplicatedHashMap}, driven by JSON lines (the jgpy side:
 * {@code jgpy.testing.rpcnode.JavaMapNode}; tests {@code tests/test_replicated_hashmap.py}).
 *
 * Commands ({@code {"cmd": ..., "id": n, ...}}, answered by {@code {"reply": n, "ok": true, ...}}):
 * {@code connect {config, cluster, name, blocking, state_timeout}} (connects, then {@code start(state_timeout)}:
 * the state transfer), {@code put {key, value}} / {@code putIfAbsent} / {@code replace} (typed values as
 * RpcNode's arguments: {@code [type, value]}), {@code remove {key}}, {@code putAll {entries: [[k, v]...]}},
 * {@code clear}, {@code dump} (the entries, each {@code describe(key)=describe(value)}, sorted), {@code exit}.
 */
public final class MapNode extends ChannelNode {
    private ReplicatedHashMap<Serializable,Serializable> map;

    public static void main(String[] args) throws Exception {
        serve(new MapNode());
    }

    static Serializable value(Object spec) {
        return (Serializable)RpcNode.typed(spec, new Class<?>[1])[0];
    }

    @Override
    Map<String,Object> run(Map<String,Object> cmd) throws Exception {
        switch((String)cmd.get("cmd")) {
            case "connect": {
                channel(cmd);
                ch.connect((String)cmd.get("cluster"));
                map=new ReplicatedHashMap<Serializable,Serializable>(ch);
                map.setBlockingUpdates(cmd.get("blocking") != null && Codec.toBool(cmd.get("blocking"), "blocking"));
                map.start(cmd.get("state_timeout") == null ? 5000 : Codec.toLong(cmd.get("state_timeout"), "state_timeout"));
                return Json.obj("address", String.valueOf(ch.getAddress()));
            }
            case "put": return Json.obj("previous", SerGolden.describe(map.put(value(cmd.get("key")), value(cmd.get("value")))));
            case "putIfAbsent":
                return Json.obj("previous", SerGolden.describe(map.putIfAbsent(value(cmd.get("key")), value(cmd.get("value")))));
            case "replace":
                return Json.obj("previous", SerGolden.describe(map.replace(value(cmd.get("key")), value(cmd.get("value")))));
            case "remove": return Json.obj("previous", SerGolden.describe(map.remove(value(cmd.get("key")))));
            case "putAll": {
                Map<Serializable,Serializable> m=new java.util.HashMap<>();
                for(Object e: (List<?>)cmd.get("entries")) {
                    List<?> kv=(List<?>)e;
                    m.put(value(kv.get(0)), value(kv.get(1)));
                }
                map.putAll(m);
                return Json.obj();
            }
            case "clear": map.clear(); return Json.obj();
            case "dump": {
                List<Object> entries=new ArrayList<>();
                for(Map.Entry<Serializable,Serializable> e: map.entrySet())
                    entries.add(SerGolden.describe(e.getKey()) + "=" + SerGolden.describe(e.getValue()));
                Collections.sort(entries, (a, b) -> ((String)a).compareTo((String)b));
                return Json.obj("entries", entries);
            }
            default: throw new IllegalArgumentException("unknown command " + cmd.get("cmd"));
        }
    }
}

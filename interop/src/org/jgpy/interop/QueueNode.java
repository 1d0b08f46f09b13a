package org.jgpy.interop;

import org.jgroups.blocks.DistributedQueue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;

/**
 * A JGroups 2.12.2 member sharing a {@link DistributedQueue}, driven by JSON lines (the jgpy side:
 * {@code jgpy.testing.rpcnode.JavaQueueNode}; tests {@code tests/test_distributed_queue.py}).
 *
 * Commands: {@code connect {config, cluster, name, state_timeout}} (the queue is made before the channel
 * connects, as 2.12's example does, then {@code start(state_timeout)}: the state transfer), {@code add {value}},
 * {@code addAtHead {value}} (typed values as RpcNode's arguments: {@code [type, value]}), {@code addAll
 * {values: [...]}}, {@code remove} (optional {@code timeout_ms}: remove(long)), {@code reset}, {@code dump}
 * (the elements, each {@code describe(value)}, head first), {@code exit}.
 */
public final class QueueNode extends ChannelNode {
    private DistributedQueue queue;

    public static void main(String[] args) throws Exception {
        serve(new QueueNode());
    }

    @Override
    Map<String,Object> run(Map<String,Object> cmd) throws Exception {
        switch((String)cmd.get("cmd")) {
            case "connect": {
                channel(cmd);
                queue=new DistributedQueue(ch);
                ch.connect((String)cmd.get("cluster"));
                queue.start(cmd.get("state_timeout") == null ? 5000 : Codec.toLong(cmd.get("state_timeout"), "state_timeout"));
                return Json.obj("address", String.valueOf(ch.getAddress()));
            }
            case "add": queue.add(MapNode.value(cmd.get("value"))); return Json.obj();
            case "addAtHead": queue.addAtHead(MapNode.value(cmd.get("value"))); return Json.obj();
            case "addAll": {
                List<Object> values=new ArrayList<>();
                for(Object v: (List<?>)cmd.get("values"))
                    values.add(MapNode.value(v));
                queue.addAll(values);
                return Json.obj();
            }
            case "remove": {
                Object v=cmd.get("timeout_ms") == null ? queue.remove() : queue.remove(Codec.toLong(cmd.get("timeout_ms"), "timeout_ms"));
                return Json.obj("value", SerGolden.describe(v));
            }
            case "reset": queue.reset(); return Json.obj();
            case "dump": {
                List<Object> elements=new ArrayList<>();
                for(Object v: queue.getContents())
                    elements.add(SerGolden.describe(v));
                return Json.obj("elements", elements);
            }
            default: throw new IllegalArgumentException("unknown command " + cmd.get("cmd"));
        }
    }
}

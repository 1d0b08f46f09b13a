package org.jgpy.interop;

import org.jgroups.blocks.ReplicatedTree;

import java.io.Serializable;
import java.util.ArrayList;
import java.util.Collections;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * A JGroups 2.12.2 member sharing a {@link ReplicatedTree}, driven by JSON lines (the jgpy side:
 * {@code jgpy.testing.rpcnode.JavaTreeNode}; tests {@code tests/test_replicated_tree.py}).
 *
 * Commands: {@code connect {config, cluster, name}} (connects, then {@code new ReplicatedTree(ch)}: the state
 * transfer; then the tree is given the channel's view), {@code put {fqn, key, value}} (a typed value as RpcNode's arguments: {@code [type, value]}),
 * {@code putData {fqn, data: {key: [type, value]}}} ({@code data} absent: null), {@code remove {fqn[, key]}},
 * {@code dump} (every node below the root, {@code fqn{describe(key)=describe(value),...}} with its keys sorted,
 * depth first in name order), {@code exit}.
 */
public final class TreeNode extends ChannelNode {
    private ReplicatedTree tree;

    public static void main(String[] args) throws Exception {
        serve(new TreeNode());
    }

    @Override
    Map<String,Object> run(Map<String,Object> cmd) throws Exception {
        switch((String)cmd.get("cmd")) {
            case "connect": {
                channel(cmd);
                ch.connect((String)cmd.get("cluster"));
                tree=new ReplicatedTree(ch);
                // 2.12's ReplicatedTree(JChannel) becomes the receiver after the channel got its view: until the
                // next view it believes it is alone and applies its changes locally only. Tell it, as an
                // application must.
                tree.viewAccepted(ch.getView());
                return Json.obj("address", String.valueOf(ch.getAddress()));
            }
            case "put": tree.put((String)cmd.get("fqn"), (String)cmd.get("key"), MapNode.value(cmd.get("value"))); return Json.obj();
            case "putData": {
                HashMap<String,Object> data=null;
                if(cmd.get("data") != null) {
                    data=new HashMap<>();
                    for(Map.Entry<?,?> e: ((Map<?,?>)cmd.get("data")).entrySet())
                        data.put((String)e.getKey(), MapNode.value(e.getValue()));
                }
                tree.put((String)cmd.get("fqn"), data);
                return Json.obj();
            }
            case "remove":
                if(cmd.get("key") != null)
                    tree.remove((String)cmd.get("fqn"), (String)cmd.get("key"));
                else
                    tree.remove((String)cmd.get("fqn"));
                return Json.obj();
            case "dump": {
                List<Object> nodes=new ArrayList<>();
                dump("/", nodes);
                return Json.obj("nodes", nodes);
            }
            default: throw new IllegalArgumentException("unknown command " + cmd.get("cmd"));
        }
    }

    private void dump(String fqn, List<Object> out) throws Exception {
        Set<?> names=tree.getChildrenNames(fqn);
        if(names == null) return;
        List<String> sorted=new ArrayList<>();
        for(Object n: names) sorted.add((String)n);
        Collections.sort(sorted);
        for(String name: sorted) {
            String child=(fqn.equals("/") ? "" : fqn) + "/" + name;
            List<String> entries=new ArrayList<>();
            Set<?> keys=tree.getKeys(child);
            if(keys != null)
                for(Object k: keys)
                    entries.add(SerGolden.describe(k) + "=" + SerGolden.describe(tree.get(child, (String)k)));
            Collections.sort(entries);
            out.add(child + "{" + String.join(",", entries) + "}");
            dump(child, out);
        }
    }
}

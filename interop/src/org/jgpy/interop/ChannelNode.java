package org.jgpy.interop;

import org.jgroups.JChannel;

import java.util.Map;

/**
 * What the building-block harnesses (MapNode, QueueNode, TreeNode) share: one channel, JSON-line commands served
 * until {@code exit}, then the channel closed.
 */
abstract class ChannelNode {
    protected JChannel ch;

    abstract Map<String,Object> run(Map<String,Object> cmd) throws Exception;

    /** A channel on the command's {@code config}, named {@code name} (not connected yet). */
    JChannel channel(Map<String,Object> cmd) throws Exception {
        ch=new JChannel((String)cmd.get("config"));
        ch.setName((String)cmd.get("name"));
        return ch;
    }

    static void serve(ChannelNode node) throws Exception {
        JsonLines.open();
        try {
            JsonLines.serve(node::run, false);
        }
        finally {
            if(node.ch != null) node.ch.close();
        }
        System.exit(0);
    }
}

"""JGroups building blocks (``org.jgroups.blocks``): MessageDispatcher and RpcDispatcher, wire-compatible with
Java 2.12's."""

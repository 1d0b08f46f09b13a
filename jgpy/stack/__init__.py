"""The protocol stack: events, properties, XML configs, protocol base class, timer, executors."""

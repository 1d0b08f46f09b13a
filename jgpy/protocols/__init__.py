"""Protocols, one module per JGroups protocol (named and configured as in the XML stack configs)."""

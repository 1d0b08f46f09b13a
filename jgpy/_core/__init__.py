"""Cython core: wire buffers, addresses, messages, headers and the 2.12 dialect (no protocol logic)."""

"""Fuzzing of every decode entry point a peer reaches (see fuzz/README.md)."""

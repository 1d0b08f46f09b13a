"""Test support shared by the test suite, the benchmarks and the demo: the Java peer driver and helpers."""

"""Conformance tests: render with isofabric, run the real OpenSM on an ibsim fabric."""

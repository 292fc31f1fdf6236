"""Helpers shared by tests: in-process servers and stubs."""

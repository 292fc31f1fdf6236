"""The benchmarks, run as modules from the repository root: `.venv/bin/python -m benchmarks.<name> --help`.

A package so that each imports the shared harness (`benchmarks._common`), the corpora and its sibling benchmarks by
their full names, with no edit of `sys.path`; docs/operations.md#benchmarks says what each one measures.
"""

"""The built-in extractor's rules (`learning/builtin.py`), one module per rule family."""

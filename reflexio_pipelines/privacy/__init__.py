"""Per-user export and erasure over the whole lake (landing files, Delta tables and their history, the index).

`scope.py` decides which rows concern a user (shared by both), `export.py` collects them, `erasure.py` removes them.
"""

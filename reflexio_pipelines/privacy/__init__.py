"""Per-user export and erasure over the whole lake (landing files, Delta tables and their history, the index).

`scope.py` decides which rows concern a user (shared by both), `shared.py` what the text of shared rows may say
(re-worded without an erased user, narrowed to the requester's words in an export), `export.py` collects the rows,
`erasure.py` removes them.
"""

"""Index shards: which users' documents a serving replica loads (`REFLEXIO_INDEX_SHARDS`, of
`REFLEXIO_INDEX_SHARD_COUNT`).

A shard is a bucket of a hash of the user id, so every document of one user is in one shard, and a user's searches
need only the replica holding that shard. Agent playbooks (shared per agent version, few) are in every replica. A
sharded replica loads the version's rows of its shards only (texts, payloads, filter columns, vectors) and opens the
BM25 index whole (memory-mapped: only the postings its queries touch are read), so BM25 statistics, and with them
every user's results, are those of the whole index.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass


def shard_of(user_id: str, count: int) -> int:
    """The shard (0..count-1) holding `user_id`'s documents; stable across processes and versions."""
    return int.from_bytes(hashlib.blake2b(user_id.encode(), digest_size=8).digest(), "big") % count


@dataclass(frozen=True)
class ShardSelector:
    """The shards a replica serves, out of `count`."""

    shards: frozenset[int]
    count: int

    @classmethod
    def parse(cls, spec: str, count: int) -> ShardSelector | None:
        """`"0,1"` of `count` shards; None (the whole index) for an empty spec or a single shard. Raises ValueError
        naming the bad part."""
        parts = [p.strip() for p in spec.split(",") if p.strip()]
        if count < 1:
            raise ValueError(f"the shard count must be at least 1, got {count}")
        if not parts:
            return None
        try:
            shards = frozenset(int(p) for p in parts)
        except ValueError:
            raise ValueError(f"shards must be comma-separated shard numbers, got {spec!r}") from None
        outside = sorted(s for s in shards if not 0 <= s < count)
        if outside:
            raise ValueError(f"shards {outside} are outside 0..{count - 1} (shard count {count})")
        return None if len(shards) == count else cls(shards, count)

    def holds(self, user_id: str | None) -> bool:
        """Whether this replica holds the documents of `user_id` (None: shared documents, held everywhere)."""
        return user_id is None or shard_of(user_id, self.count) in self.shards

    def describe(self) -> str:
        """ "0,1 of 4" (for messages and /health)."""
        return f"{','.join(map(str, sorted(self.shards)))} of {self.count}"

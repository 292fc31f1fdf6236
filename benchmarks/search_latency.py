"""Search latency, ours vs a faithful re-implementation of the original Reflexio's SQLite hybrid search.

Method of the original's `reflexio/benchmarks/retrieval_latency`: N profiles + N user playbooks +
N agent playbooks (templates x a 70-word vocabulary, RNG seed 42, 10 users, 3 agent versions, 5 playbook names),
20 fixed queries of five kinds, warm-up passes, then `--trials` passes over the 20 queries; p50/p95/mean in ms over
all timed calls; query embeddings cached (computed once per query, outside the timings).

Ours: a published index (`publish_index`) opened with `LoadedIndex`; service layer = `LoadedIndex.search` per
entity type and the `/api/search` handler called in-process (unified); HTTP layer = `python -m serving` (uvicorn,
127.0.0.1, TCP) hit with `POST /api/search` from a keep-alive httpx client.

Baseline, in the same run: SQLite FTS5 (porter unicode61) BM25 over OR-joined sanitised tokens
(prefix `*` on the last one), LIMIT top_k*5; vector leg = the newest top_k*10 rows that pass the filters, their
JSON-stored 512-d embeddings decoded and compared by pure-Python cosine, top_k*5 kept; RRF k=60 with missing rank =
len(list)+1. Unified = profiles, user playbooks, agent playbooks queried one after another. Its HTTP layer is the
same code behind a minimal FastAPI app served by uvicorn in a subprocess of this script.

Vectors: at N <= --real-max (default 1000) documents are embedded with the real local model (384-d). Beyond,
document vectors are synthetic but text-like: compositions of real embeddings of the text's parts plus a little
noise (see `SyntheticEmbedder`).
Query vectors are always real. The baseline stores the same vectors zero-padded to 512-d (the original's dimension;
identical cosines, the original's JSON/Python cost). Our index builds an HNSW graph for types with at least
--hnsw-min-rows rows (default 50,000, so at 33,333/type the vector leg is exact and at 333,333/type it is HNSW);
recall@10 of each side's vector leg against exact cosine over the admissible rows is reported beside latency.

Sizes default to 3x1,000, 3x33,333 and 3x333,333 rows, each with the baseline in the same process. The baseline
takes seconds per query at the largest size, so above --baseline-full-max it runs --baseline-trials-large passes
(the sample count is in every stats entry). The serving process's RSS is measured at the largest size. Results are
written as JSON after every size (benchmarks/results/ is git-ignored).

    .venv/bin/python -m benchmarks.search_latency [--sizes 1000,33333,333333] [--trials 30] [--warmup 3]
        [--layers service,http] [--http-sizes 1000] [--hnsw-min-rows 50000] [--baseline-full-max 33333]
        [--baseline-trials-large 5] [--note TEXT] [--output PATH]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import random
import re
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
import zlib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
from pydantic import BaseModel

from benchmarks._common import (
    ROOT,
    child_env,
    free_port,
    http_ok,
    peak_rss_mb,
    rss_mb,
    service_cmd,
    start_process,
    stop_process,
)
from reflexio_pipelines.search.ann import HNSW_MIN_ROWS

DEFAULT_OUTPUT = ROOT / "benchmarks" / "results" / "search_latency.json"
KINDS = ("profile", "user_playbook", "agent_playbook", "unified")
TOP_K = 10  # the original's benchmark: every request top_k=10
THRESHOLD = 0.3  # UnifiedSearchRequest default; ours applies it to the vector leg, the original ignores it
RRF_K = 60
BASELINE_DIM = 512
BASE_TS = 1_760_000_000
NEVER_EXPIRES = 4_102_444_800
USERS = [f"bench_user_{i}" for i in range(10)]
AGENT_VERSIONS = ["agent-v1", "agent-v2", "agent-v3"]
PLAYBOOK_NAMES = ["default_playbook_extractor", "sql_helper", "report_style", "tool_usage", "escalation"]

# --------------------------------------------------------------------------------------------- corpus

VOCAB = (
    "dashboard revenue quarterly snowflake postgres bigquery csv excel chart python pandas notebook timeout "
    "retry cache warehouse schema migration invoice refund customer churn cohort funnel latency deploy kubernetes "
    "docker terraform oauth token permission backup restore export import metric forecast budget marketing sales "
    "support ticket escalation slack email calendar meeting summary bullet concise verbose markdown table json "
    "yaml api webhook pipeline airflow dbt looker tableau privacy compliance audit region europe timezone weekly"
).split()
assert len(VOCAB) == 70, len(VOCAB)

PROFILE_TEMPLATES = [
    "The user prefers {a} output when reviewing {b} reports",
    "User works mostly with {a} and {b} in the analytics team",
    "The user's {a} jobs often hit {b} problems on Mondays",
    "User asked to always include a {a} section next to the {b} numbers",
    "The user is responsible for {a} and reports weekly on {b}",
    "User dislikes {a} answers and wants {b} examples instead",
    "The user's company stores {a} data in {b}",
    "User mentioned that {a} access requires a {b} approval",
    "The user schedules {a} reviews around the {b} deadline",
    "User is migrating from {a} to {b} this quarter",
]
TRIGGER_TEMPLATES = [
    "When the user asks about {a}",
    "If a {a} query fails with {b}",
    "When exporting {a} results to {b}",
    "When the user mentions {a} and {b}",
    "If the {a} tool returns an error",
    "When summarising {a} for a {b} meeting",
    "When the user requests a {a} chart",
    "If {a} permissions block the {b} job",
    "When a {a} deadline is close",
    "When comparing {a} with {b}",
]
CONTENT_TEMPLATES = [
    "check the {a} settings before touching {b}",
    "answer with a short {a} table and mention {b}",
    "retry the {a} step once, then report the {b} error",
    "ask which {a} the user means before running {b}",
    "prefer {a} over {b} unless told otherwise",
    "link the {a} documentation and the {b} runbook",
    "keep the {a} summary to three bullets about {b}",
    "escalate to the {a} owner when {b} is missing",
    "use the {a} timezone for every {b} date",
    "never expose {a} values in {b} outputs",
]

# Planted documents (ids outside the generated range): the keyword and rare-token queries must find them.
PLANTED = {
    "profile": ("planted-profile-kestrel", "User keeps the kestrel ledger export as the source of truth for invoices"),
    "user_playbook": (
        "900000001",
        "When the zorbleflux sync fails | rerun the qx7731 reconciliation and notify finance",
    ),
    "agent_playbook": ("900000002", "If a hyperloglog sketch overflows | switch to the xylograph approximate counter"),
}
PLANTED_USER = "bench_user_0"

QUERIES: list[tuple[str, str]] = [
    ("short_keyword", "kestrel ledger export"),
    ("short_keyword", "snowflake timeout"),
    ("short_keyword", "csv invoice refund"),
    ("short_keyword", "oauth token permission"),
    ("short_semantic", "how does the user like charts"),
    ("short_semantic", "what should the agent avoid saying"),
    ("short_semantic", "when are meetings usually held"),
    ("short_semantic", "data privacy worries"),
    (
        "long_conversational",
        "hey so yesterday I was trying to get the quarterly revenue dashboard to load and it kept "
        "timing out again, can you remind me what we decided about caching the warehouse queries?",
    ),
    (
        "long_conversational",
        "ok thanks, and before I forget, my manager wants the churn numbers by cohort in the "
        "weekly email, but last time the table was way too long, what format did I say I prefer?",
    ),
    (
        "long_conversational",
        "I'm moving our nightly jobs from airflow to dbt next sprint and I keep getting "
        "permission errors on the bigquery side, what did we learn the last time this happened?",
    ),
    (
        "long_conversational",
        "quick question, the marketing team asked for a forecast of next quarter's budget, should "
        "I send them the notebook or a summary in slack, and in which timezone should the dates be?",
    ),
    (
        "long_semantic",
        "guidance for handling failures of scheduled data pipelines that load reporting tables and how "
        "to communicate those failures to stakeholders",
    ),
    (
        "long_semantic",
        "preferences about the length, structure and formatting of analytical answers such as tables, "
        "bullet lists and markdown summaries",
    ),
    (
        "long_semantic",
        "rules about protecting sensitive customer information and complying with regional regulations "
        "when sharing exported data",
    ),
    (
        "long_semantic",
        "how the assistant should behave when it lacks access rights to a database or tool that the "
        "user asked it to use",
    ),
    ("rare_token", "zorbleflux"),
    ("rare_token", "qx7731 reconciliation"),
    ("rare_token", "hyperloglog sketch overflow"),
    ("rare_token", "xylograph"),
]
assert len(QUERIES) == 20


def query_user(qi: int) -> str:
    """The user_id sent with query `qi`: round-robin over the pool, except that the queries aimed at the planted
    per-user documents are sent as their owner (both sides filter profiles and user playbooks by user)."""
    return PLANTED_USER if qi in (0, 16, 17) else USERS[qi % 10]


def _fill(rng: random.Random, template: str) -> tuple[str, int, int]:
    a, b = rng.sample(VOCAB, 2)
    return template.format(a=a, b=b), VOCAB.index(a), VOCAB.index(b)


def generate_rows(n: int) -> dict[str, list[dict[str, Any]]]:
    """N rows per entity type, as plain dicts (also the source of the baseline's SQLite rows).

    Each row carries `_parts`, what its text is made of, from which `SyntheticEmbedder` composes its vector:
    (template table index, first word, second word[, content template table index, its first word, second word]).
    """
    rows: dict[str, list[dict[str, Any]]] = {"profile": [], "user_playbook": [], "agent_playbook": []}
    for seed_offset, entity in enumerate(rows):
        rng = random.Random(42 + seed_offset)
        for i in range(n):
            t = rng.randrange(10)
            created = BASE_TS + i * 37 + rng.randrange(30)
            if entity == "profile":
                text, a, b = _fill(rng, PROFILE_TEMPLATES[t])
                rows[entity].append(
                    {
                        "id": f"p{i:07d}",
                        "user_id": USERS[rng.randrange(10)],
                        "content": text,
                        "trigger": None,
                        "agent_version": None,
                        "playbook_name": None,
                        "created_at": created,
                        "_parts": (t, a, b),
                    }
                )
            else:
                trig, a, b = _fill(rng, TRIGGER_TEMPLATES[t])
                c = rng.randrange(10)
                content, ca, cb = _fill(rng, CONTENT_TEMPLATES[c])
                base = 1_000_000 if entity == "user_playbook" else 2_000_000
                rows[entity].append(
                    {
                        "id": str(base + i),
                        "user_id": USERS[rng.randrange(10)] if entity == "user_playbook" else None,
                        "content": content,
                        "trigger": trig,
                        "agent_version": AGENT_VERSIONS[rng.randrange(3)],
                        "playbook_name": PLAYBOOK_NAMES[rng.randrange(5)],
                        "created_at": created,
                        "playbook_status": "approved" if rng.random() < 0.8 else "pending",
                        "_parts": (10 + t, a, b, 20 + c, ca, cb),
                    }
                )
    # Plant one findable document per type, in the middle of the time range (not among the newest rows).
    for entity, (doc_id, text) in PLANTED.items():
        mid = rows[entity][n // 2]
        if entity == "profile":
            mid.update(id=doc_id, content=text, user_id=PLANTED_USER, _parts=None)
        else:
            trig, content = (s.strip() for s in text.split("|"))
            mid.update(id=doc_id, trigger=trig, content=content, _parts=None)
            if entity == "user_playbook":
                mid["user_id"] = PLANTED_USER
            else:
                mid["playbook_status"] = "approved"
    return rows


def doc_text(entity: str, row: dict[str, Any]) -> str:
    return row["content"] if entity == "profile" else f"{row['trigger']} {row['content']}"


def to_search_docs(rows: dict[str, list[dict[str, Any]]]) -> list[Any]:
    """SearchDocs with the production payload shapes (built by reflexio_pipelines.search.documents)."""
    from reflexio_pipelines.search.documents import agent_playbook_docs, profile_docs, user_playbook_docs

    prov = {
        "source_turn_ids": [],
        "window": None,
        "extraction_window_id": "w",
        "extractor": "bench",
        "prompt_version": "v1",
        "model": "bench",
        "run_id": "bench",
    }

    def rule(r: dict[str, Any]) -> dict[str, Any]:
        """The rule columns both playbook tables hold (no rationale, nothing blocking)."""
        return dict(
            created_at=r["created_at"],
            content=r["content"],
            trigger=r["trigger"],
            rationale=None,
            blocking_issue_kind=None,
            blocking_issue_details=None,
        )

    profiles = [
        dict(
            prov,
            profile_id=r["id"],
            user_id=r["user_id"],
            content=r["content"],
            last_modified_timestamp=r["created_at"],
            generated_from_request_id="req",
            profile_time_to_live="infinity",
            expiration_timestamp=NEVER_EXPIRES,
            custom_features=None,
            source="bench",
            status="current",
            extractor_names=["default_profile_extractor"],
        )
        for r in rows["profile"]
    ]
    user_pbs = [
        dict(
            prov,
            user_playbook_id=int(r["id"]),
            user_id=r["user_id"],
            agent_version=r["agent_version"],
            request_id="req",
            playbook_name=r["playbook_name"],
            **rule(r),
            status="current",
            source="bench",
            source_interaction_ids=[],
            kind="rule",
        )
        for r in rows["user_playbook"]
    ]
    agent_pbs = [
        dict(
            agent_playbook_id=int(r["id"]),
            playbook_name=r["playbook_name"],
            agent_version=r["agent_version"],
            **rule(r),
            playbook_status=r["playbook_status"],
            status="current",
            member_ids=[],
            member_user_ids=[],
        )
        for r in rows["agent_playbook"]
    ]
    return profile_docs(profiles) + user_playbook_docs(user_pbs) + agent_playbook_docs(agent_pbs, {})


TEMPLATE_TABLE = PROFILE_TEMPLATES + TRIGGER_TEMPLATES + CONTENT_TEMPLATES  # the template indices in `_parts`


class SyntheticEmbedder:
    """Text-like synthetic document vectors for corpora too large to embed on this machine, deterministic per text.

    A vector is composed from real embeddings of what the text is made of: its template filled with its first word
    (weight 1), its second word alone (0.35) and, for playbooks, the content template filled with its first word
    (0.6) and that word pair's second word (0.2); plus gaussian noise (cosine ~0.98 to the composition). Texts
    sharing parts are neighbours, so the data has the low intrinsic dimension of real sentence embeddings. (Wide
    isotropic noise around a few centres would instead make every cluster a ball of near-ties that no real corpus,
    and no approximate index, looks like.) Same model_id/dim as the real model, so real query vectors live in the
    same space and the service accepts the index."""

    WEIGHTS = (1.0, 0.35, 0.6, 0.2)
    SIGMA = 0.012  # per dimension: noise of norm ~0.23 against a composition of norm ~1.1-1.4

    def __init__(self, real: Any, rows: dict[str, list[dict[str, Any]]]) -> None:
        from reflexio_pipelines.search.text import normalize_text

        self.model_id, self.dim = real.model_id, int(real.dim)
        self._real = real
        self._meta: dict[str, tuple[int, ...] | None] = {}
        filled: set[tuple[int, int]] = set()
        for entity, group in rows.items():
            for r in group:
                parts = r["_parts"]
                self._meta[normalize_text(doc_text(entity, r))] = parts
                if parts is not None:
                    filled.update(zip(parts[0::3], parts[1::3]))
        order = sorted(filled)
        sentences = [TEMPLATE_TABLE[t].format(a=VOCAB[a], b="data") for t, a in order]
        self._filled = dict(zip(order, self._unit(real.embed(sentences)))) if order else {}
        self._words = self._unit(real.embed(VOCAB))

    @staticmethod
    def _unit(vectors: Any) -> np.ndarray:
        v = np.asarray(vectors, dtype=np.float32)
        return v / np.linalg.norm(v, axis=1, keepdims=True)

    def embed(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        real_needed = [i for i, t in enumerate(texts) if self._meta.get(t) is None]
        if real_needed:  # planted docs (and anything unknown) get their real embedding
            out[real_needed] = np.asarray(self._real.embed([texts[i] for i in real_needed]))
        w_filled, w_word, w_content, w_content_word = self.WEIGHTS
        for i, text in enumerate(texts):
            parts = self._meta.get(text)
            if parts is None:
                continue
            v = w_filled * self._filled[parts[0], parts[1]] + w_word * self._words[parts[2]]
            if len(parts) == 6:
                v = v + w_content * self._filled[parts[3], parts[4]] + w_content_word * self._words[parts[5]]
            rng = np.random.default_rng(zlib.crc32(text.encode()))
            v = v + rng.normal(0.0, self.SIGMA, self.dim).astype(np.float32)
            out[i] = v / np.linalg.norm(v)
        return out


# --------------------------------------------------------------------------------------------- baseline

_FTS_TOKEN = re.compile(r"[A-Za-z0-9_]+")


def sanitize_fts_query(query: str) -> str:
    """The original's `_sanitize_fts_query`: word tokens, explicit OR/AND/NOT kept, else OR-joined; NEAR dropped;
    prefix `*` on the last token; no tokens -> ""."""
    tokens = [t for t in _FTS_TOKEN.findall(query) if t != "NEAR"]
    if not tokens:
        return ""
    ops = {"OR", "AND", "NOT"}
    if any(t in ops for t in tokens):
        while tokens and tokens[-1] in ops:
            tokens.pop()
        while tokens and tokens[0] in ops:
            tokens.pop(0)
        if not tokens:
            return ""
        tokens[-1] += "*"
        return " ".join(tokens)
    tokens[-1] += "*"
    return " OR ".join(tokens)


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    na = math.sqrt(sum(x * x for x in a))
    nb = math.sqrt(sum(y * y for y in b))
    return dot / (na * nb) if na and nb else 0.0


def build_baseline_db(path: Path, rows: dict[str, list[dict[str, Any]]], vectors: dict[str, np.ndarray]) -> None:
    """SQLite tables + FTS5 tables as the original's sqlite storage keeps them; embeddings as JSON 512-d lists.

    `vectors[entity]` is row-aligned with `rows[entity]`. The db is a throwaway built once per size: no journal,
    no fsync, one transaction, executemany (the original inserts row by row, which only changes build time)."""
    con = sqlite3.connect(path, isolation_level=None)
    con.executescript("""
        PRAGMA journal_mode=OFF;
        PRAGMA synchronous=OFF;
        CREATE TABLE profiles (profile_id TEXT PRIMARY KEY, user_id TEXT, content TEXT,
            last_modified_timestamp INTEGER, generated_from_request_id TEXT, profile_time_to_live TEXT,
            expiration_timestamp INTEGER, custom_features TEXT, source TEXT, status TEXT, extractor_names TEXT,
            embedding TEXT);
        CREATE VIRTUAL TABLE profiles_fts USING fts5(profile_id, content, tokenize='porter unicode61');
        CREATE TABLE user_playbooks (user_playbook_id INTEGER PRIMARY KEY, user_id TEXT, agent_version TEXT,
            request_id TEXT, playbook_name TEXT, created_at INTEGER, content TEXT, trigger TEXT, rationale TEXT,
            blocking_issue TEXT, status TEXT, source TEXT, source_interaction_ids TEXT, embedding TEXT);
        CREATE VIRTUAL TABLE user_playbooks_fts USING fts5(search_text, tokenize='porter unicode61');
        CREATE TABLE agent_playbooks (agent_playbook_id INTEGER PRIMARY KEY, playbook_name TEXT, agent_version TEXT,
            created_at INTEGER, content TEXT, trigger TEXT, rationale TEXT, blocking_issue TEXT,
            playbook_status TEXT, playbook_metadata TEXT, status TEXT, embedding TEXT);
        CREATE VIRTUAL TABLE agent_playbooks_fts USING fts5(search_text, tokenize='porter unicode61');
        CREATE INDEX idx_profiles_user ON profiles(user_id);
        CREATE INDEX idx_profiles_ts ON profiles(last_modified_timestamp);
        CREATE INDEX idx_up_user ON user_playbooks(user_id);
        CREATE INDEX idx_up_created ON user_playbooks(created_at);
        CREATE INDEX idx_ap_created ON agent_playbooks(created_at);
    """)

    def emb(entity: str, i: int) -> str:
        padded = np.zeros(BASELINE_DIM, dtype=np.float64)
        padded[: vectors[entity].shape[1]] = vectors[entity][i]
        return json.dumps(np.round(padded, 8).tolist())

    con.execute("BEGIN")
    con.executemany(
        "INSERT INTO profiles(rowid, profile_id, user_id, content, last_modified_timestamp, generated_from_request_id, "
        "profile_time_to_live, expiration_timestamp, custom_features, source, status, extractor_names, embedding) "
        "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            (
                i + 1,
                r["id"],
                r["user_id"],
                r["content"],
                r["created_at"],
                "req",
                "infinity",
                NEVER_EXPIRES,
                "{}",
                "bench",
                None,
                '["default_profile_extractor"]',
                emb("profile", i),
            )
            for i, r in enumerate(rows["profile"])
        ),
    )
    con.executemany(
        "INSERT INTO profiles_fts(rowid, profile_id, content) VALUES (?,?,?)",
        ((i + 1, r["id"], r["content"]) for i, r in enumerate(rows["profile"])),
    )
    con.executemany(
        "INSERT INTO user_playbooks VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            (
                int(r["id"]),
                r["user_id"],
                r["agent_version"],
                "req",
                r["playbook_name"],
                r["created_at"],
                r["content"],
                r["trigger"],
                None,
                None,
                None,
                "bench",
                "[]",
                emb("user_playbook", i),
            )
            for i, r in enumerate(rows["user_playbook"])
        ),
    )
    con.executemany(
        "INSERT INTO user_playbooks_fts(rowid, search_text) VALUES (?,?)",
        ((int(r["id"]), doc_text("user_playbook", r)) for r in rows["user_playbook"]),
    )
    con.executemany(
        "INSERT INTO agent_playbooks VALUES (?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            (
                int(r["id"]),
                r["playbook_name"],
                r["agent_version"],
                r["created_at"],
                r["content"],
                r["trigger"],
                None,
                None,
                r["playbook_status"],
                "",
                None,
                emb("agent_playbook", i),
            )
            for i, r in enumerate(rows["agent_playbook"])
        ),
    )
    con.executemany(
        "INSERT INTO agent_playbooks_fts(rowid, search_text) VALUES (?,?)",
        ((int(r["id"]), doc_text("agent_playbook", r)) for r in rows["agent_playbook"]),
    )
    con.execute("COMMIT")
    con.close()


class BaselineSearch:
    """The original's sqlite hybrid search, per entity type and unified (sequential)."""

    _SPEC = {
        # table, fts table, id column, time column, bm25 weights
        "profile": ("profiles", "profiles_fts", "profile_id", "last_modified_timestamp", "0.0, 1.0"),
        "user_playbook": ("user_playbooks", "user_playbooks_fts", "user_playbook_id", "created_at", "1.0"),
        "agent_playbook": ("agent_playbooks", "agent_playbooks_fts", "agent_playbook_id", "created_at", "1.0"),
    }

    def __init__(self, db_path: Path) -> None:
        self.con = sqlite3.connect(str(db_path), check_same_thread=False)
        self.con.row_factory = sqlite3.Row

    def _filters(self, entity: str, user_id: str | None) -> tuple[list[str], list[Any]]:
        where: list[str] = []
        args: list[Any] = []
        if entity == "profile":
            where += ["t.expiration_timestamp >= ?", "t.status IS NULL"]
            args.append(int(time.time()))
            if user_id:
                where.append("t.user_id = ?")
                args.append(user_id)
        elif entity == "user_playbook":  # unified: status_filter=None (all statuses)
            if user_id:
                where.append("t.user_id = ?")
                args.append(user_id)
        else:  # agent playbooks: status_filter=[None], no playbook_status filter
            where.append("t.status IS NULL")
        return where, args

    def _fts_leg(self, entity: str, query: str, user_id: str | None, limit: int) -> list[sqlite3.Row]:
        match = sanitize_fts_query(query)
        if not match:
            return []
        table, fts, _, _, weights = self._SPEC[entity]
        where, args = self._filters(entity, user_id)
        sql = (
            f"SELECT t.*, bm25({fts}, {weights}) AS fts_score FROM {fts} JOIN {table} t ON t.rowid = {fts}.rowid "
            f"WHERE {fts} MATCH ? {''.join(' AND ' + w for w in where)} ORDER BY fts_score LIMIT ?"
        )
        return self.con.execute(sql, [match, *args, limit]).fetchall()

    def _vector_leg(self, entity: str, qvec: list[float], user_id: str | None, top_k: int) -> list[sqlite3.Row]:
        table, _, _, ts, _ = self._SPEC[entity]
        where, args = self._filters(entity, user_id)
        sql = (
            f"SELECT t.* FROM {table} t {'WHERE ' + ' AND '.join(where) if where else ''} ORDER BY t.{ts} DESC LIMIT ?"
        )
        rows = self.con.execute(sql, [*args, top_k * 10]).fetchall()
        scored = []
        for row in rows:
            emb = json.loads(row["embedding"]) if row["embedding"] else []
            if emb:
                scored.append((_cosine(qvec, emb), row))
        scored.sort(key=lambda s: s[0], reverse=True)
        return [row for _, row in scored[: top_k * 5]]

    def search(
        self, entity: str, query: str, qvec: list[float] | None, user_id: str | None, top_k: int = TOP_K
    ) -> list[dict[str, Any]]:
        id_col = self._SPEC[entity][2]
        if qvec is None:
            fts = self._fts_leg(entity, query, user_id, top_k)
            return [self._view(r) for r in fts]
        fts = self._fts_leg(entity, query, user_id, top_k * 5)
        vec = self._vector_leg(entity, qvec, user_id, top_k)
        fts_rank = {r[id_col]: i + 1 for i, r in enumerate(fts)}
        vec_rank = {r[id_col]: i + 1 for i, r in enumerate(vec)}
        by_id = {r[id_col]: r for r in (*fts, *vec)}
        miss_f, miss_v = len(fts) + 1, len(vec) + 1
        scores = {i: 1.0 / (RRF_K + fts_rank.get(i, miss_f)) + 1.0 / (RRF_K + vec_rank.get(i, miss_v)) for i in by_id}
        ranked = sorted(scores, key=lambda i: scores[i], reverse=True)[:top_k]
        return [self._view(by_id[i]) for i in ranked]

    @staticmethod
    def _view(row: sqlite3.Row) -> dict[str, Any]:
        d = {k: row[k] for k in row.keys() if k not in ("embedding", "fts_score")}
        d["embedding"] = json.loads(row["embedding"]) if row["embedding"] else []  # the model row carries it
        return d

    def unified(self, query: str, qvec: list[float] | None, user_id: str | None, top_k: int = TOP_K) -> dict[str, Any]:
        out: dict[str, Any] = {"success": True, "profiles": [], "user_playbooks": [], "agent_playbooks": []}
        if user_id:
            out["profiles"] = self.search("profile", query, qvec, user_id, top_k)
        out["agent_playbooks"] = self.search("agent_playbook", query, qvec, None, top_k)
        out["user_playbooks"] = self.search("user_playbook", query, qvec, user_id, top_k)
        return out

    def vector_leg_ids(self, entity: str, qvec: list[float], user_id: str | None, k: int) -> list[str]:
        id_col = self._SPEC[entity][2]
        return [str(r[id_col]) for r in self._vector_leg(entity, qvec, user_id, TOP_K)[:k]]


def padded(vec: np.ndarray) -> list[float]:
    out = [0.0] * BASELINE_DIM
    out[: len(vec)] = [float(x) for x in vec]
    return out


def _ids(entity: str, payloads: list[dict[str, Any]]) -> list[str]:
    key = {"profile": "profile_id", "user_playbook": "user_playbook_id", "agent_playbook": "agent_playbook_id"}[entity]
    return [str(p[key]) for p in payloads]


class BaselineBody(BaseModel):
    """The original's UnifiedSearchRequest fields the baseline uses (extra fields ignored)."""

    query: str
    top_k: int = 5
    threshold: float = 0.3
    user_id: str | None = None
    agent_version: str | None = None
    playbook_name: str | None = None
    search_mode: str = "hybrid"


def serve_baseline(db_path: str, port: int) -> None:
    """Subprocess mode: the baseline behind a minimal FastAPI app on uvicorn (the HTTP layer's baseline)."""
    import uvicorn
    from fastapi import FastAPI

    from reflexio_pipelines.learning.embedding import embed_one, make_embedder

    search = BaselineSearch(Path(db_path))
    embedder = make_embedder()
    app = FastAPI()

    @app.post("/api/search")
    def unified(body: BaselineBody) -> dict[str, Any]:
        qvec = padded(embed_one(embedder, body.query))  # cached per query, like the original's benchmark
        return search.unified(body.query, qvec, body.user_id, body.top_k)

    @app.get("/health")
    def health() -> dict[str, str]:
        return {"status": "ok"}

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


# --------------------------------------------------------------------------------------------- harness


def stats(samples_ms: list[float]) -> dict[str, float]:
    s = sorted(samples_ms)

    def pct(p: float) -> float:  # linear interpolation, like numpy's default
        return float(np.percentile(s, p))

    return {"p50": round(pct(50), 3), "p95": round(pct(95), 3), "mean": round(statistics.fmean(s), 3), "n": len(s)}


def _compare(ours: dict[str, float], baseline: dict[str, float]) -> dict[str, Any]:
    """Both sides' stats and ours/baseline ratios (4 significant digits: ours can be 1/100 of the baseline)."""
    ratio = lambda p: float(f"{ours[p] / baseline[p]:.4g}")  # noqa: E731
    return {"ours": ours, "baseline": baseline, "ratio_p50": ratio("p50"), "ratio_p95": ratio("p95")}


def timed(fn: Any, warmup: int, trials: int) -> list[float]:
    """fn(qi) for each of the 20 queries: `warmup` untimed passes, then `trials` timed passes."""
    for _ in range(warmup):
        for qi in range(len(QUERIES)):
            fn(qi)
    samples = []
    for _ in range(trials):
        for qi in range(len(QUERIES)):
            t0 = time.perf_counter()
            fn(qi)
            samples.append((time.perf_counter() - t0) * 1000.0)
    return samples


def start_ours(lake: Path, work: Path) -> tuple[subprocess.Popen, str]:
    """`python -m serving` over `lake`; returns once a search answers from a loaded index version."""
    import httpx

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = child_env(REFLEXIO_LAKE=str(lake), DAGSTER_HOME=str(work / "dagster_home"))
    (work / "dagster_home").mkdir(exist_ok=True)

    def ready() -> bool:
        try:
            r = httpx.post(f"{url}/api/search", json={"query": "warmup"}, timeout=30)
        except httpx.HTTPError:
            return False
        return r.status_code == 200 and r.json().get("index_version") is not None

    cmd = service_cmd(lake, port, daemon=False)  # the lake is built before timing: no daemon rebuilding it
    return start_process(cmd, env, ready, timeout=180, what="our service"), url


def start_baseline(db: Path) -> tuple[subprocess.Popen, str]:
    """This script's `--serve-baseline` mode over `db`; returns once /health answers."""
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "benchmarks.search_latency", "--serve-baseline", str(db), "--port", str(port)]
    return start_process(cmd, child_env(), http_ok(f"{url}/health", timeout=2), timeout=180, what="the baseline"), url


def http_bodies() -> list[dict[str, Any]]:
    return [
        {"query": q, "top_k": TOP_K, "user_id": query_user(qi), "enable_reformulation": False}
        for qi, (_, q) in enumerate(QUERIES)
    ]


def run_size(
    n: int, args: argparse.Namespace, work: Path, embedder: Any, qvecs: list[np.ndarray], largest: bool
) -> dict[str, Any]:
    from reflexio_pipelines.lake.io import Lake
    from reflexio_pipelines.search.query import LoadedIndex
    from reflexio_pipelines.search.types import SearchFilters
    from reflexio_pipelines.search.versions import publish_index
    from reflexio_pipelines.settings import Settings
    from serving.models.search import UnifiedSearchRequest
    from serving.routers.search import unified_search
    from serving.state import ServiceState

    out: dict[str, Any] = {"n_per_type": n, "rows_total": 3 * n, "results": {}}
    log = lambda msg: print(f"[N={n}] {msg}", flush=True)  # noqa: E731
    size_dir = work / f"n{n}"
    size_dir.mkdir()
    lake_root = size_dir / "lake"

    out["load_avg_before"] = [round(x, 2) for x in os.getloadavg()]
    t0 = time.perf_counter()
    rows = generate_rows(n)
    docs = to_search_docs(rows)
    real = n <= args.real_max
    doc_embedder = embedder if real else SyntheticEmbedder(embedder, rows)
    out["document_vectors"] = "real (local model)" if real else "synthetic (compositions of real part embeddings)"
    version = publish_index(Lake.at(lake_root).index_root, docs, doc_embedder, hnsw_min_rows=args.hnsw_min_rows)
    del docs
    out["build_ours_s"] = round(time.perf_counter() - t0, 2)
    log(f"our index {version} built in {out['build_ours_s']} s ({out['document_vectors']})")

    index = LoadedIndex.load(Lake.at(lake_root).index_root)
    ann = index.manifest.get("ann", {})
    out["vector_index"] = {
        e: ("hnsw " + json.dumps(ann[e]["params"], sort_keys=True) if e in ann else "exact") for e in rows
    }
    out["ann_build_s"] = {e: ann[e]["build_seconds"] for e in ann}
    log(f"vector legs: {out['vector_index']}")
    # Row-aligned with `rows`: the exact vectors the index holds (the index orders rows by doc_id).
    vectors = {
        e: index._table(e).vectors[[index._table(e).row_of[r["id"]] for r in group]] for e, group in rows.items()
    }
    t0 = time.perf_counter()
    db_path = size_dir / "baseline.sqlite"
    build_baseline_db(db_path, rows, vectors)
    out["build_baseline_s"] = round(time.perf_counter() - t0, 2)
    out["baseline_db_mb"] = round(db_path.stat().st_size / 2**20, 1)
    log(f"baseline sqlite built in {out['build_baseline_s']} s ({out['baseline_db_mb']} MB)")
    model_id = index.embedder_model_id
    del index  # the service state below loads its own copy; one at a time keeps the 1M-row run's memory down
    base = BaselineSearch(db_path)
    qpad = [padded(v) for v in qvecs]
    # The baseline costs up to seconds per query at large N: cap its passes there (stats record the sample count).
    base_trials = args.trials if n <= args.baseline_full_max else min(args.trials, args.baseline_trials_large)

    # ---- service layer
    if "service" in args.layers:
        state = ServiceState.create(Settings(lake=str(lake_root)))
        state.index.refresh()
        state.control.refresh()
        state.curation.refresh()
        # What serving.deps.service reads off a request: the tenant registry and the request's organisation.
        tenants = SimpleNamespace(state=lambda org_id: state)
        fake_request = SimpleNamespace(
            app=SimpleNamespace(state=SimpleNamespace(tenants=tenants)),
            state=SimpleNamespace(org_id=state.org_id),
            headers={},
        )
        # Query vectors as the router computes them (through the embedder's per-query cache).
        for _, q in QUERIES:
            state.query_vector(q, model_id)
        svc_index = state.index.index

        def ours_entity(entity: str) -> Any:
            def run(qi: int) -> list[dict]:
                q = QUERIES[qi][1]
                vec = state.query_vector(q, svc_index.embedder_model_id)
                user = query_user(qi) if entity != "agent_playbook" else None
                filt = (
                    SearchFilters(user_id=user, playbook_statuses=None)
                    if entity == "agent_playbook"
                    else SearchFilters(user_id=user)
                )
                hits = svc_index.search(entity, q, vec, top_k=TOP_K, threshold=THRESHOLD, mode="hybrid", filters=filt)
                return [h.payload for h in hits]

            return run

        def ours_unified(qi: int) -> Any:
            body = UnifiedSearchRequest(query=QUERIES[qi][1], top_k=TOP_K, user_id=query_user(qi))
            return unified_search(body, fake_request, state)

        def base_entity(entity: str) -> Any:
            def run(qi: int) -> list[dict]:
                user = query_user(qi) if entity != "agent_playbook" else None
                return base.search(entity, QUERIES[qi][1], qpad[qi], user)

            return run

        def base_unified(qi: int) -> Any:
            return base.unified(QUERIES[qi][1], qpad[qi], query_user(qi))

        layer: dict[str, Any] = {}
        for kind in KINDS:
            o_fn = ours_unified if kind == "unified" else ours_entity(kind)
            b_fn = base_unified if kind == "unified" else base_entity(kind)
            o = stats(timed(o_fn, args.warmup, args.trials))
            b = stats(timed(b_fn, min(args.warmup, base_trials), base_trials))
            layer[kind] = _compare(o, b)
            log(
                f"service {kind:14s} ours p50/p95 {o['p50']:.2f}/{o['p95']:.2f} ms, "
                f"baseline {b['p50']:.2f}/{b['p95']:.2f} ms"
            )
        out["results"]["service"] = layer

        # Top ids of the unified search per query (ours and baseline) and planted-doc checks.
        top: dict[str, list[dict[str, list[str]]]] = {"ours": [], "baseline": []}
        for qi in range(len(QUERIES)):
            r = ours_unified(qi)
            top["ours"].append(
                {
                    "profiles": _ids("profile", r.profiles),
                    "user_playbooks": _ids("user_playbook", r.user_playbooks),
                    "agent_playbooks": _ids("agent_playbook", r.agent_playbooks),
                }
            )
            b = base_unified(qi)
            top["baseline"].append(
                {
                    "profiles": _ids("profile", b["profiles"]),
                    "user_playbooks": _ids("user_playbook", b["user_playbooks"]),
                    "agent_playbooks": _ids("agent_playbook", b["agent_playbooks"]),
                }
            )
        out["top_ids_unified"] = top
        out["planted_found"] = _planted_found(top)

        # recall@10 of the vector legs vs exact brute-force cosine over the same admissible rows.
        out["recall_at_10"] = _recall(svc_index, rows, vectors, qvecs, base)
        log(f"recall@10 vector leg: ours {out['recall_at_10']['ours']}, baseline {out['recall_at_10']['baseline']}")

    # ---- HTTP layer (uvicorn over TCP, keep-alive client), unified only (the one search endpoint)
    http_sizes = {int(s) for s in args.http_sizes.split(",") if s}
    run_http = "http" in args.layers and n in http_sizes
    if run_http or (largest and "http" in args.layers):
        import httpx

        ours_proc, ours_url = start_ours(lake_root, size_dir)
        try:
            bodies = http_bodies()
            with httpx.Client(timeout=60) as client:

                def ours_http(qi: int) -> None:
                    r = client.post(f"{ours_url}/api/search", json=bodies[qi])
                    r.raise_for_status()

                if run_http:
                    o = stats(timed(ours_http, args.warmup, args.trials))
                else:
                    timed(ours_http, 1, 0)  # one pass so RSS reflects a serving process that has answered queries
                    o = None
                out["service_rss_mb"] = rss_mb(ours_proc.pid)
                log(f"our serving process RSS {out['service_rss_mb']} MB")
        finally:
            stop_process(ours_proc)
        if run_http:
            base_proc, base_url = start_baseline(db_path)
            try:
                with httpx.Client(timeout=60) as client:

                    def base_http(qi: int) -> None:
                        r = client.post(f"{base_url}/api/search", json=bodies[qi])
                        r.raise_for_status()

                    b = stats(timed(base_http, args.warmup, args.trials))
                    out["baseline_service_rss_mb"] = rss_mb(base_proc.pid)
            finally:
                stop_process(base_proc)
            out["results"]["http"] = {"unified": _compare(o, b)}
            log(
                f"http    unified        ours p50/p95 {o['p50']:.2f}/{o['p95']:.2f} ms, "
                f"baseline {b['p50']:.2f}/{b['p95']:.2f} ms"
            )
    base.con.close()
    return out


def _planted_found(top: dict[str, list[dict[str, list[str]]]]) -> dict[str, dict[str, bool]]:
    """Did each side return the planted doc for the queries that target it?"""
    targets = {  # query index -> (result field, planted id)
        0: ("profiles", PLANTED["profile"][0]),
        16: ("user_playbooks", PLANTED["user_playbook"][0]),
        17: ("user_playbooks", PLANTED["user_playbook"][0]),
        18: ("agent_playbooks", PLANTED["agent_playbook"][0]),
        19: ("agent_playbooks", PLANTED["agent_playbook"][0]),
    }
    return {
        side: {f"q{qi}:{QUERIES[qi][1]}": pid in top[side][qi][field] for qi, (field, pid) in targets.items()}
        for side in top
    }


def _recall(
    index: Any,
    rows: dict[str, list[dict]],
    vectors: dict[str, np.ndarray],
    qvecs: list[np.ndarray],
    base: BaselineSearch,
) -> dict[str, Any]:
    """recall@10 of each side's vector leg against exact cosine over every row passing the same filters.

    Tie-aware: a returned row counts when its cosine reaches the exact 10th best (minus float noise). Large
    synthetic corpora repeat texts, so the "true" top 10 by id is arbitrary among equal vectors."""
    from reflexio_pipelines.search.types import SearchFilters

    ours_r, base_r = [], []
    for entity, group in rows.items():
        position = {r["id"]: i for i, r in enumerate(group)}
        mat = vectors[entity]
        users = np.asarray([r["user_id"] or "" for r in group])
        for qi, q in enumerate(qvecs):
            qn = q / np.linalg.norm(q)
            user = query_user(qi) if entity != "agent_playbook" else None
            cand = np.arange(len(group)) if user is None else np.flatnonzero(users == user)
            k = min(10, len(cand))
            if k == 0:
                continue
            sims = mat[cand] @ qn
            kth = float(np.partition(sims, len(sims) - k)[len(sims) - k]) - 1e-5

            def recall(found: list[str], mat=mat, position=position, qn=qn, kth=kth, k=k) -> float:
                return sum(float(mat[position[i]] @ qn) >= kth for i in found[:k]) / k

            filt = (
                SearchFilters(user_id=user, playbook_statuses=None)
                if entity == "agent_playbook"
                else SearchFilters(user_id=user)
            )
            hits = index.search(entity, QUERIES[qi][1], q, top_k=10, threshold=-1.0, mode="vector", filters=filt)
            ours_r.append(recall([h.doc_id for h in hits]))
            base_r.append(recall(base.vector_leg_ids(entity, padded(q), user, 10)))
    return {
        "ours": round(statistics.fmean(ours_r), 4),
        "baseline": round(statistics.fmean(base_r), 4),
        "pairs": len(ours_r),
        "vector_index": {e: ("hnsw" if index._table(e).ann is not None else "exact") for e in rows},
        "note": "vector leg only (ours: mode=vector, no threshold, HNSW where built; baseline: newest top_k*10 "
        "window), vs exact cosine over all rows passing the filters; tie-aware (cosine >= exact "
        "10th)",
    }


def print_table(results: dict[str, Any]) -> None:
    head = (
        f"{'layer':8s} {'retrieval':15s} {'N/type':>8s} | {'ours p50':>9s} {'p95':>8s} {'mean':>8s} | "
        f"{'base p50':>9s} {'p95':>8s} {'mean':>8s} | {'ratio p50':>9s} {'p95':>7s}"
    )
    print("\n" + head + "\n" + "-" * len(head))
    for n, sz in results["sizes"].items():
        for layer, kinds in sz["results"].items():
            for kind, r in kinds.items():
                o, b = r["ours"], r["baseline"]
                print(
                    f"{layer:8s} {kind:15s} {n:>8s} | {o['p50']:9.3f} {o['p95']:8.3f} {o['mean']:8.3f} | "
                    f"{b['p50']:9.3f} {b['p95']:8.3f} {b['mean']:8.3f} | {r['ratio_p50']:9.4g} {r['ratio_p95']:7.4g}"
                )
    print("(ms; ratio = ours / baseline, lower is better)")


def _write(path: Path, results: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2) + "\n")


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="1000,33333,333333", help="rows per entity type, comma-separated")
    parser.add_argument("--trials", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--layers", default="service,http")
    parser.add_argument("--http-sizes", default="1000", help="sizes at which the HTTP layer runs")
    parser.add_argument("--real-max", type=int, default=1000, help="largest N embedded with the real model")
    parser.add_argument(
        "--hnsw-min-rows",
        type=int,
        default=HNSW_MIN_ROWS,
        help="rows per entity type from which our index builds an HNSW graph",
    )
    parser.add_argument(
        "--baseline-full-max", type=int, default=33333, help="largest N at which the baseline runs all --trials passes"
    )
    parser.add_argument(
        "--baseline-trials-large",
        type=int,
        default=5,
        help="baseline passes above --baseline-full-max (it takes seconds per query there)",
    )
    parser.add_argument("--note", default="", help="free text stored with the results (e.g. machine conditions)")
    parser.add_argument("--output", default=str(DEFAULT_OUTPUT))
    parser.add_argument("--keep", action="store_true", help="keep the temp lake/sqlite directory")
    parser.add_argument("--serve-baseline", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.serve_baseline:
        serve_baseline(args.serve_baseline, args.port)
        return {}
    args.layers = [s.strip() for s in args.layers.split(",") if s.strip()]
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]

    from reflexio_pipelines.learning.embedding import make_embedder
    from reflexio_pipelines.search.text import embed_search_query

    started = time.perf_counter()
    embedder = make_embedder()
    qvecs = [embed_search_query(embedder, q) for _, q in QUERIES]  # cached: outside every timing
    results: dict[str, Any] = {
        "benchmark": "search_latency",
        "config": {
            "sizes": sizes,
            "trials": args.trials,
            "warmup": args.warmup,
            "layers": args.layers,
            "http_sizes": args.http_sizes,
            "hnsw_min_rows": args.hnsw_min_rows,
            "baseline_full_max": args.baseline_full_max,
            "baseline_trials_large": args.baseline_trials_large,
            "top_k": TOP_K,
            "threshold_ours": THRESHOLD,
            "rrf_k": RRF_K,
            "queries": [{"kind": k, "query": q, "user_id": query_user(i)} for i, (k, q) in enumerate(QUERIES)],
            "embedder": {
                "model_id": embedder.model_id,
                "dim_ours": int(embedder.dim),
                "dim_baseline": BASELINE_DIM,
                "baseline_vectors": "ours zero-padded to 512-d",
            },
        },
        "machine": {
            "python": platform.python_version(),
            "platform": platform.platform(),
            "cpus": os.cpu_count(),
            "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
            "note": args.note,
        },
        "sizes": {},
        "notes": [
            "service layer: ours = LoadedIndex.search per entity / the /api/search handler in-process (unified); "
            "baseline = the original's sqlite algorithm in-process",
            "http layer: both behind uvicorn subprocesses on 127.0.0.1, keep-alive httpx client, unified only",
            "query embeddings cached (computed before timing), as in the original's benchmark",
            "shared machine: other processes may load the CPUs during the run (see load averages per size)",
        ],
    }
    out = Path(args.output)
    work = Path(tempfile.mkdtemp(prefix="search-latency-"))
    try:
        for n in sizes:
            results["sizes"][str(n)] = run_size(n, args, work, embedder, qvecs, largest=(n == max(sizes)))
            results["sizes"][str(n)]["load_avg_after"] = [round(x, 2) for x in os.getloadavg()]
            _write(out, results)  # after every size: a long run that dies later still leaves its numbers
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    largest = results["sizes"][str(max(sizes))]
    results["service_rss_mb_at_largest"] = {"n_per_type": max(sizes), "rss_mb": largest.get("service_rss_mb")}
    results["bench_process_maxrss_mb"] = peak_rss_mb()
    results["wall_s"] = round(time.perf_counter() - started, 1)
    _write(out, results)
    print_table(results)
    for n, sz in results["sizes"].items():
        if "recall_at_10" in sz:
            print(
                f"N={n}: recall@10 vector leg ours {sz['recall_at_10']['ours']} / baseline "
                f"{sz['recall_at_10']['baseline']} (ours: {sz['recall_at_10']['vector_index']}); planted docs "
                f"found (of 5 targeted queries): ours {sum(sz['planted_found']['ours'].values())}, "
                f"baseline {sum(sz['planted_found']['baseline'].values())}; load avg before/after "
                f"{sz['load_avg_before']} / {sz['load_avg_after']}"
            )
    print(
        f"service RSS at N={max(sizes)}/type ({3 * max(sizes):,} rows): {largest.get('service_rss_mb')} MB; "
        f"wall {results['wall_s']} s"
    )
    print(
        f"load average at start {results['machine']['load_avg_at_start']} on {os.cpu_count()} CPUs: on this shared "
        f"machine other processes compete for the CPUs, so absolute times are pessimistic"
        + (f" ({args.note})" if args.note else "")
    )
    print(f"wrote {out}")
    return results


if __name__ == "__main__":
    main()

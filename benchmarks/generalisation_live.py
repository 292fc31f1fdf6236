"""The live half of `benchmarks/extraction_generalisation.py`: one `python -m serving` on a fresh temporary lake
and `$DAGSTER_HOME` per built-in extractor (`REFLEXIO_LLM_BUILTIN`), bodies shaped as reflexio-client 0.2.2 sends
them, learning by `python -m reflexio_pipelines materialize`, and the judges of served@5, junk and supersession."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import httpx

from benchmarks._common import (
    ROOT,
    hermetic_env,
    make_dagster_home,
    start_service,
    stop_process,
)

AGENT = "bench-generalisation"
TOP_K = 5
Turns = list[dict[str, str]]


def ratio(num: float, den: float) -> float | None:
    return round(num / den, 4) if den else None


def head_sha() -> str:
    """The first 16 hex digits of the clause head file's sha256 (it may be retrained while a benchmark runs)."""
    import hashlib

    from reflexio_pipelines.learning.clauses.head import HEAD_FILE

    path = Path(HEAD_FILE)
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.exists() else "missing"


def key_match(keys: Sequence[str], text: str) -> bool:
    """A key is a word or phrase matched at word boundaries, case-insensitively; a trailing * makes it a prefix."""
    low = text.lower()
    for key in keys:
        stem = key.lower().rstrip("*")
        tail = "" if key.endswith("*") else r"(?!\w)"
        if re.search(r"(?<!\w)" + re.escape(stem) + tail, low):
            return True
    return False


def item_text(item: dict) -> str:
    """What a served item tells the agent: a profile's content, a playbook's trigger and content (not the
    rationale or custom features, which quote the user)."""
    return " ".join(str(item[k]).strip() for k in ("trigger", "content") if item.get(k))


def item_requests(item: dict) -> set[str]:
    """The publishes (request ids) an item was learned from."""
    ids = {item.get("generated_from_request_id") or "", item.get("request_id") or ""}
    ids |= {t.split(":")[0] for t in (item.get("provenance") or {}).get("source_turn_ids") or []}
    return ids - {""}


def publish_body(user: str, session: str, turns: Turns) -> dict:
    """The body reflexio-client 0.2.2's `publish_interaction` sends (`PublishUserInteractionRequest.model_dump()`)."""
    blank = dict.fromkeys(
        ("shadow_content", "expert_content", "user_action_description", "interacted_image_url", "image_encoding"), ""
    )
    data = [
        {
            "created_at": int(time.time()),
            "role": "User" if t["role"] == "user" else "Assistant",
            "content": t["content"],
        }
        | blank
        | {"user_action": "none", "tools_used": []}
        for t in turns
    ]
    session_fields = {"source": "", "agent_version": AGENT, "session_id": session}
    return {"user_id": user, "interaction_data_list": data, **session_fields} | dict.fromkeys(
        ("skip_aggregation", "force_extraction"), False
    )


def _search_bodies(user: str, query: str) -> dict[str, tuple[str, dict]]:
    """The original client's unified and per-entity search bodies with its default thresholds (0.3 unified, 0.4
    per entity) and its None-valued fields, top 5."""
    base = {"query": query, "user_id": user, "top_k": TOP_K, "enable_reformulation": False, "search_mode": "hybrid"}
    unified = base | {"threshold": 0.3} | dict.fromkeys(("agent_version", "playbook_name", "conversation_history"))
    entity = base | {"threshold": 0.4} | dict.fromkeys(("start_time", "end_time"))
    profile_extra = dict.fromkeys(("generated_from_request_id", "source", "custom_feature", "extractor_name"))
    playbook_extra = dict.fromkeys(("agent_version", "playbook_name", "status_filter"))
    return {
        "unified": ("/api/search", unified),
        "profiles": ("/api/search_profiles", entity | profile_extra),
        "user_playbooks": ("/api/search_user_playbooks", entity | playbook_extra),
    }


class Live:
    """One `python -m serving` on a fresh lake with one built-in extractor; publishes, learns, searches."""

    def __init__(self, mode: str, work: Path) -> None:
        self.mode, self.lake = mode, work / "lake"
        home = make_dagster_home(work / "dagster_home")
        env = hermetic_env(REFLEXIO_LAKE=str(self.lake), DAGSTER_HOME=str(home), REFLEXIO_LLM_BUILTIN=mode)
        env["REFLEXIO_HOLDOUT_SHARE"] = "0"  # no control group: every probe user gets learned context
        self.env = env
        # daemon=False: learn() runs the materialize it times
        self.proc, self.url = start_service(self.lake, env, daemon=False, timeout=120, what="serving")
        self.http = httpx.Client(base_url=self.url, timeout=300)
        self.learn_s: list[float] = []
        self.head_shas: list[str] = []  # the head each materialize process loads

    def close(self) -> None:
        self.http.close()
        stop_process(self.proc, group=True)

    def publish(self, user: str, session: str, turns: Turns) -> str:
        reply = self.http.post("/api/publish_interaction", json=publish_body(user, session, turns))
        reply.raise_for_status()
        return reply.json()["request_id"]

    def learn(self) -> None:
        """One materialize over every pending window, then wait until the service serves the new index."""
        began = time.monotonic()
        self.head_shas.append(head_sha())
        cmd = [sys.executable, "-m", "reflexio_pipelines", "materialize", "--lake", str(self.lake), "--flush", "all"]
        done = subprocess.run(cmd, env=self.env, capture_output=True, text=True, timeout=900, cwd=ROOT)
        if done.returncode != 0:
            raise RuntimeError(f"materialize failed ({self.mode}): {done.stdout[-1500:]} {done.stderr[-1500:]}")
        version = re.search(r"^index version: (\S+)", done.stdout, re.M)
        deadline = time.monotonic() + 120
        while version and self.http.get("/health").json().get("index_version") != version.group(1):
            if time.monotonic() > deadline:
                raise RuntimeError(f"the service did not swap to index {version.group(1)}")
            time.sleep(0.2)
        self.learn_s.append(round(time.monotonic() - began, 1))

    def search(self, user: str, query: str) -> dict[str, list[dict]]:
        """Served items per route: unified (profiles + user playbooks) and per-entity (both searches)."""
        got: dict[str, list[dict]] = {}
        for route, (path, body) in _search_bodies(user, query).items():
            reply = self.http.post(path, json=body)
            reply.raise_for_status()
            data = reply.json()
            got[route] = [*data.get("profiles", []), *data.get("user_profiles", []), *data.get("user_playbooks", [])]
        return {"unified": got["unified"], "per_entity": got["profiles"] + got["user_playbooks"]}

    def learned_items(self, user: str) -> list[dict]:
        body = {"user_id": user, "status_filter": ["current"]}
        profiles = self.http.post("/api/get_profiles", json={**body, "top_k": 1000}).json()["user_profiles"]
        playbooks = self.http.post("/api/get_user_playbooks", json={**body, "limit": 1000}).json()["user_playbooks"]
        return [*profiles, *playbooks]


def live_run(mode: str, plan: dict, work: Path) -> dict:
    """Publish the plan's sessions in two rounds (learned after each), then search and judge."""
    live = Live(mode, work)
    try:
        requests: dict[tuple[str, str], str] = {}
        for user, label, turns in plan["round1"]:
            requests[(user, label)] = live.publish(user, f"{user}-{label}", turns)
        live.learn()
        for user, label, turns in plan["round2"]:
            requests[(user, label)] = live.publish(user, f"{user}-{label}", turns)
        live.learn()
        return {
            "served": _judge_served(live, plan["served"], requests),
            "junk": _judge_junk(live, plan, requests),
            "supersession": _judge_supersession(live, plan["supersede"], requests),
            "learn_runs_s": live.learn_s,
            "head_sha_per_learn_run": live.head_shas,
        }
    finally:
        live.close()


def _judge_served(live: Live, probes: list[tuple[str, dict]], requests: dict) -> dict:
    out: dict = {"probes": len(probes), "per_probe": []}
    for route in ("unified", "per_entity"):
        out[route] = {"hits": 0, "served_related": 0, "relevant_related": 0, "false_serves": 0, "false_serves_local": 0}
    local = sum(not p.get("global") for _, p in probes)
    for user, probe in probes:
        statement = requests[(user, "statement")]
        learned = [i for i in live.learned_items(user) if statement in item_requests(i)]
        detail: dict = {"id": probe["id"], "learned_from_statement": [item_text(i) for i in learned]}
        for route in ("unified", "per_entity"):
            related = live.search(user, probe["related"])[route]
            unrelated = live.search(user, probe["unrelated"])[route]
            relevant = [i for i in related if key_match(probe["keys"], item_text(i))]
            wrong = any(key_match(probe["keys"], item_text(i)) for i in unrelated)
            stats = out[route]
            stats["hits"] += bool(relevant)
            stats["served_related"] += len(related)
            stats["relevant_related"] += len(relevant)
            stats["false_serves"] += wrong
            stats["false_serves_local"] += wrong and not probe.get("global")
            detail[route] = {"hit": bool(relevant), "served": [item_text(i) for i in related], "false_serve": wrong}
        detail["learned_with_keys"] = any(key_match(probe["keys"], t) for t in detail["learned_from_statement"])
        out["per_probe"].append(detail)
    for route in ("unified", "per_entity"):
        s = out[route]
        s["served_at_5"] = ratio(s["hits"], len(probes))
        s["served_precision"] = ratio(s["relevant_related"], s["served_related"])
        s["false_serve_rate"] = ratio(s["false_serves"], len(probes))
        s["false_serve_rate_non_global"] = ratio(s["false_serves_local"], local)
    out["learned_with_keys"] = ratio(sum(d["learned_with_keys"] for d in out["per_probe"]), len(probes))
    return out


def _judge_junk(live: Live, plan: dict, requests: dict) -> dict:
    """Learned items per ordinary chat session: the junk users' sessions, and apart the filler around probes."""
    junk_items = [i for user, _ in plan["junk"] for i in live.learned_items(user)]
    filler_ids = {rid for (user, label), rid in requests.items() if label.startswith("filler")}
    filler_items = [
        i
        for user, _ in plan["served"] + plan["supersede"]
        for i in live.learned_items(user)
        if item_requests(i) & filler_ids
    ]
    return {
        "sessions": len(plan["junk"]),
        "items": len(junk_items),
        "items_per_session": ratio(len(junk_items), len(plan["junk"])),
        "examples": [item_text(i) for i in junk_items[:15]],
        "filler_sessions": len(filler_ids),
        "filler_items": len(filler_items),
        "filler_items_per_session": ratio(len(filler_items), len(filler_ids)),
        "filler_examples": [item_text(i) for i in filler_items[:10]],
    }


def _judge_supersession(live: Live, probes: list[tuple[str, dict]], requests: dict) -> dict:
    out: dict = {"probes": len(probes), "per_probe": []}
    with_update = [p for _, p in probes if p["new_keys"]]
    for route in ("unified", "per_entity"):
        out[route] = {"old_items_served": 0, "old_by_words_served": 0, "probes_with_old_served": 0, "updates_served": 0}
    for user, probe in probes:
        earlier, later = requests[(user, "earlier")], requests[(user, "later")]
        detail: dict = {"id": probe["id"], "current_items": [item_text(i) for i in live.learned_items(user)]}
        for route, served in live.search(user, probe["query"]).items():
            old = [i for i in served if earlier in item_requests(i)]
            by_words = [
                i
                for i in served
                if key_match(probe["old_keys"], item_text(i)) and not key_match(probe["new_keys"], item_text(i))
            ]
            either = {id(i) for i in old + by_words}
            update = bool(probe["new_keys"]) and any(
                later in item_requests(i) or key_match(probe["new_keys"], item_text(i)) for i in served
            )
            s = out[route]
            s["old_items_served"] += len(old)
            s["old_by_words_served"] += len(by_words)
            s["probes_with_old_served"] += bool(either)
            s["updates_served"] += update
            detail[route] = {"served": [item_text(i) for i in served], "old": len(either), "update": update}
        out["per_probe"].append(detail)
    for route in ("unified", "per_entity"):
        out[route]["update_served_rate"] = ratio(out[route]["updates_served"], len(with_update))
    return out

"""The original Reflexio's contradiction scenarios and its OpenClaw eval's `search_relevance`, run against the real
service and judged the way the original's own tests judge them.

The scenarios are not copied into this repository: they are read at run time, with `git show`, from a clone of
the original (`--reflexio-repo`, a bare or working git directory): `tests/test_data/contradiction_scenarios.json`
and `reflexio/integrations/openclaw/eval/dataset.json`. The JSON written to benchmarks/results/ (git-ignored)
quotes what was learned from them.

How each kind is played and judged (mirroring the original):

- contradiction scenario (its e2e test `test_profile_dedup_resolves_contradiction`): publish batch_1, wait until it
  is learned (`?wait_for_response=true`), read the user's current items: one of `batch_1_sanity_terms` must be in
  them; publish batch_2 likewise, read again: for `"tests": ["profiles"]` the current profiles' text (lower-cased,
  joined) must contain one of `expected_keywords` and none of `should_not_contain`. For `"tests": ["playbooks"]`
  (the original has no test for it; judged the same way on the playbooks' trigger and content) the text must hold
  one of `expected_playbook_keywords`, none of `playbook_must_not_instruct`, and one current playbook must
  instruct one of `playbook_must_instruct_any_of`.
- OpenClaw eval steps (its `eval/runner.py`): `seed_user_playbook` is `POST /api/add_user_playbook` with a
  request id `eval-seed-…`, `search` is `POST /api/search` with the client's full `UnifiedSearchRequest`
  (top_k 5, threshold 0.3, hybrid), `verify_result_contains` / `verify_result_not_contains` look for the text
  (case-insensitively) in that field of every returned user playbook, agent playbook and profile.

`tests/test_original_scenarios.py` plays our own scenarios of the same shape through the same functions.

    .venv/bin/python -m benchmarks.original_scenarios [--reflexio-repo PATH] [--out PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from benchmarks._common import (
    ROOT,
    child_env,
    make_dagster_home,
    start_service,
    stop_process,
    write_result,
)

DEFAULT_REPO = Path("/work/.mirror/ReflexioAI+reflexio/repo")
CONTRADICTIONS_PATH = "tests/test_data/contradiction_scenarios.json"
OPENCLAW_DATASET_PATH = "reflexio/integrations/openclaw/eval/dataset.json"
SEARCH_SCENARIO_ID = "search_relevance"
RESULT = ROOT / "benchmarks" / "results" / "original_scenarios.json"
AGENT_VERSION = "scenario-agent"
#: A publish that waits runs a Dagster run over the window: allow a slow machine (and a slow model) plenty.
PUBLISH_TIMEOUT_S = 600.0

Post = Callable[[str, dict[str, Any]], dict[str, Any]]


@dataclass
class Check:
    """One judged condition of a scenario."""

    name: str
    passed: bool
    detail: str = ""


@dataclass
class ScenarioResult:
    """A scenario's verdict, its checks and the items it was judged on."""

    name: str
    kind: str  # "contradiction" or "openclaw"
    passed: bool
    checks: list[Check]
    observed: dict[str, Any] = field(default_factory=dict)

    def failures(self) -> list[str]:
        """`name: detail` of every failed check."""
        return [f"{c.name}: {c.detail}" for c in self.checks if not c.passed]


# ----------------------------------------------------------------------------------------------------------------
# Judging (pure: the benchmark and the tests share it)
# ----------------------------------------------------------------------------------------------------------------


def playbook_text(playbook: dict[str, Any]) -> str:
    """What a playbook instructs: its trigger and content (its rationale explains, it does not instruct)."""
    return " ".join(part for part in (playbook.get("trigger"), playbook.get("content")) if part)


def _joined(texts: list[str]) -> str:
    return " ".join(t.lower() for t in texts)


def judged_texts(scenario: dict[str, Any], profiles: list[dict], playbooks: list[dict]) -> list[str]:
    """The texts a scenario is judged on: its profiles' contents, or its playbooks' instructions."""
    if "playbooks" in scenario.get("tests", ["profiles"]):
        return [playbook_text(p) for p in playbooks]
    return [p["content"] for p in profiles]


def judge_batch_1(scenario: dict[str, Any], profiles: list[dict], playbooks: list[dict]) -> Check:
    """After batch_1: the initial state is there (one of `batch_1_sanity_terms` in the judged items)."""
    texts = judged_texts(scenario, profiles, playbooks)
    terms = [t.lower() for t in scenario.get("batch_1_sanity_terms", [])]
    combined = _joined(texts)
    if not terms:
        return Check("batch_1_sanity", True, "no sanity terms")
    found = [t for t in terms if t in combined]
    detail = f"found {found}" if found else f"none of {terms} in {texts}"
    return Check("batch_1_sanity", bool(texts) and bool(found), detail)


def judge_final(scenario: dict[str, Any], profiles: list[dict], playbooks: list[dict]) -> list[Check]:
    """After batch_2: the newer state is there, and nothing of the stale one (see the module docstring)."""
    if "playbooks" in scenario.get("tests", ["profiles"]):
        texts = [playbook_text(p) for p in playbooks]
        expected = scenario.get("expected_playbook_keywords", [])
        stale = scenario.get("playbook_must_not_instruct", [])
    else:
        texts = [p["content"] for p in profiles]
        expected = scenario.get("expected_keywords", [])
        stale = scenario.get("should_not_contain", [])
    combined = _joined(texts)
    checks = [Check("has_items", bool(texts), f"{len(texts)} current")]
    hit = [k for k in expected if k.lower() in combined]
    checks.append(
        Check(
            "expected_keywords",
            bool(hit) or not expected,
            f"found {hit}"
            if hit
            else f"none of {expected} in {texts} (expected: {scenario.get('expected_final_state')})",
        )
    )
    survived = [s for s in stale if s.lower() in combined]
    checks.append(
        Check("stale_absent", not survived, f"stale {survived} in {texts}" if survived else "no stale phrase")
    )
    must = scenario.get("playbook_must_instruct_any_of")
    if must and "playbooks" in scenario.get("tests", []):
        instructing = [t for t in texts if any(m.lower() in t.lower() for m in must)]
        checks.append(
            Check(
                "playbook_instructs",
                bool(instructing),
                f"instructed by {instructing}" if instructing else f"no playbook instructs any of {must}: {texts}",
            )
        )
    return checks


def field_values(search_response: dict[str, Any], field_name: str) -> list[str]:
    """Every non-empty `field_name` value of a unified search answer's user playbooks, agent playbooks and profiles
    (the OpenClaw eval runner's `_collect_field_values`)."""
    values = []
    for kind in ("user_playbooks", "agent_playbooks", "profiles"):
        for item in search_response.get(kind) or []:
            value = item.get(field_name)
            if value:
                values.append(str(value))
    return values


def judge_search_step(step: dict[str, Any], search_response: dict[str, Any] | None) -> Check:
    """A `verify_result_contains` / `verify_result_not_contains` step against the last search's answer."""
    action, params = step["action"], step.get("params", {})
    field_name, needle = params.get("field", "content"), params["contains"].lower()
    if search_response is None:
        return Check(action, False, "no search results stored — run 'search' action first")
    values = field_values(search_response, field_name)
    present = any(needle in v.lower() for v in values)
    if action == "verify_result_contains":
        return Check(action, present, f"{needle!r} {'found' if present else 'not found'} in {field_name}: {values}")
    return Check(action, not present, f"{needle!r} {'present' if present else 'absent'} in {field_name}: {values}")


# ----------------------------------------------------------------------------------------------------------------
# Playing scenarios against a running service
# ----------------------------------------------------------------------------------------------------------------


def http_post(base_url: str, timeout: float = PUBLISH_TIMEOUT_S) -> Post:
    """`post(path, body) -> JSON answer` against `base_url` (raises on a non-2xx answer)."""
    import httpx

    def post(path: str, body: dict[str, Any]) -> dict[str, Any]:
        reply = httpx.post(f"{base_url}{path}", json=body, timeout=timeout)
        reply.raise_for_status()
        return reply.json()

    return post


def _publish_learned(post: Post, user_id: str, batch: list[dict[str, str]]) -> dict[str, Any]:
    body = {
        "user_id": user_id,
        "agent_version": AGENT_VERSION,
        "source": "contradiction_test",
        "interaction_data_list": [{"role": turn["role"], "content": turn["content"]} for turn in batch],
    }
    return post("/api/publish_interaction?wait_for_response=true", body)


def current_items(post: Post, user_id: str) -> tuple[list[dict], list[dict]]:
    """The user's current profiles and user playbooks, read through the API."""
    profiles = post("/api/get_profiles", {"user_id": user_id, "status_filter": [None]})["user_profiles"]
    playbooks = post("/api/get_user_playbooks", {"user_id": user_id, "status_filter": [None]})["user_playbooks"]
    return profiles, playbooks


def _summary(profiles: list[dict], playbooks: list[dict]) -> dict[str, Any]:
    return {
        "profiles": [p["content"] for p in profiles],
        "playbooks": [{"trigger": p.get("trigger"), "content": p.get("content")} for p in playbooks],
    }


def play_contradiction(post: Post, scenario: dict[str, Any], user_id: str | None = None) -> ScenarioResult:
    """Publish batch_1 and wait until it is learned, judge it, then batch_2, and judge the final current items."""
    user_id = user_id or f"{scenario['name']}_user_{uuid.uuid4().hex[:8]}"
    first = _publish_learned(post, user_id, scenario["batch_1"])
    profiles, playbooks = current_items(post, user_id)
    observed: dict[str, Any] = {"user_id": user_id, "after_batch_1": _summary(profiles, playbooks)}
    checks = [Check("batch_1_learned", bool(first.get("learned")), first.get("message", ""))]
    checks.append(judge_batch_1(scenario, profiles, playbooks))
    second = _publish_learned(post, user_id, scenario["batch_2"])
    checks.append(Check("batch_2_learned", bool(second.get("learned")), second.get("message", "")))
    profiles, playbooks = current_items(post, user_id)
    observed["final"] = _summary(profiles, playbooks)
    checks += judge_final(scenario, profiles, playbooks)
    return ScenarioResult(scenario["name"], "contradiction", all(c.passed for c in checks), checks, observed)


def play_openclaw(post: Post, scenario: dict[str, Any]) -> ScenarioResult:
    """The seed / search / verify steps of an OpenClaw eval scenario, as its runner performs them."""
    checks: list[Check] = []
    last: dict[str, Any] | None = None
    observed: dict[str, Any] = {"searches": []}
    for step in scenario["steps"]:
        action, params = step["action"], step.get("params", {})
        if action == "seed_user_playbook":
            playbook = {
                "user_id": params["user_id"],
                "agent_version": params.get("agent_version", "openclaw-agent"),
                "request_id": f"eval-seed-{uuid.uuid4().hex[:8]}",
                "content": params["content"],
                "trigger": params.get("trigger"),
                "rationale": params.get("rationale"),
            }
            answer = post("/api/add_user_playbook", {"user_playbooks": [playbook]})
            checks.append(Check(action, bool(answer.get("success")), answer.get("message") or answer.get("msg", "")))
        elif action == "search":
            last = post(
                "/api/search",
                {
                    "query": params["query"],
                    "top_k": 5,
                    "threshold": 0.3,
                    "agent_version": None,
                    "playbook_name": None,
                    "user_id": params.get("user_id"),
                    "conversation_history": None,
                    "enable_reformulation": False,
                    "search_mode": "hybrid",
                },
            )
            observed["searches"].append(
                {"query": params["query"], "user_playbooks": [playbook_text(p) for p in last["user_playbooks"]]}
            )
        elif action in ("verify_result_contains", "verify_result_not_contains"):
            checks.append(judge_search_step(step, last))
        else:
            raise ValueError(f"{scenario['id']}: step {action!r} is not one this runner plays")
    return ScenarioResult(scenario["id"], "openclaw", all(c.passed for c in checks), checks, observed)


# ----------------------------------------------------------------------------------------------------------------
# The benchmark: the original's files, the real service, a table
# ----------------------------------------------------------------------------------------------------------------


def git_show_json(repo: Path, path: str) -> dict[str, Any]:
    """A JSON file of the original at its HEAD, read with `git show` (nothing is copied into this repository)."""
    done = subprocess.run(["git", "-C", str(repo), "show", f"HEAD:{path}"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"cannot read {path} from {repo}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def load_original(repo: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the contradiction scenarios, the OpenClaw `search_relevance` scenario) of the original at `repo`."""
    contradictions = git_show_json(repo, CONTRADICTIONS_PATH)["scenarios"]
    dataset = git_show_json(repo, OPENCLAW_DATASET_PATH)
    search = next(s for s in dataset["scenarios"] if s["id"] == SEARCH_SCENARIO_ID)
    return contradictions, search


def _start_service(root: Path) -> tuple[subprocess.Popen, str]:
    """`python -m serving` on 127.0.0.1 over a fresh lake under `root`; returns once /health answers."""
    lake, home = root / "lake", make_dagster_home(root / "dagster_home")
    env = child_env(REFLEXIO_LAKE=str(lake), DAGSTER_HOME=str(home))
    return start_service(lake, env, daemon=True, timeout=180)  # the service alone, learning as a user would see it


def run_all(post: Post, contradictions: list[dict[str, Any]], search: dict[str, Any] | None) -> list[ScenarioResult]:
    """Every contradiction scenario (each with a user of its own), then the search scenario."""
    results = [play_contradiction(post, scenario) for scenario in contradictions]
    if search is not None:
        results.append(play_openclaw(post, search))
    return results


def table(results: list[ScenarioResult]) -> str:
    """A plain-text pass/fail table with the first failed check of each scenario."""
    lines = [f"{'scenario':<26} {'kind':<14} {'result':<6} first failure", "-" * 100]
    for r in results:
        failures = r.failures()
        lines.append(f"{r.name:<26} {r.kind:<14} {'PASS' if r.passed else 'FAIL':<6} {failures[0] if failures else ''}")
    passed = sum(r.passed for r in results)
    lines.append(f"{passed}/{len(results)} passed")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reflexio-repo", type=Path, default=DEFAULT_REPO, help="git directory of the original")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args(argv)
    contradictions, search = load_original(args.reflexio_repo)
    began = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="original-scenarios-") as tmp:
        proc, url = _start_service(Path(tmp))
        try:
            results = run_all(http_post(url), contradictions, search)
        finally:
            stop_process(proc, timeout=30, group=True)
    print(table(results))
    report = {
        "reflexio_repo": str(args.reflexio_repo),
        "extractor": os.environ.get("REFLEXIO_LLM_MODEL") or "builtin rules (no REFLEXIO_LLM_MODEL)",
        "seconds": round(time.monotonic() - began, 1),
        "passed": sum(r.passed for r in results),
        "total": len(results),
        "scenarios": [asdict(r) for r in results],
    }
    print(f"wrote {write_result(args.out, report)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

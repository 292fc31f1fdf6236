"""A small, fully materialised sample lake for the analyst notebooks (and their test).

    .venv/bin/python notebooks/sample_lake.py /tmp/sample-lake     # then open a notebook with REFLEXIO_LAKE=/tmp/sample-lake

`lake_analytics.ipynb` and `evaluation.ipynb` call `build_sample_lake` themselves (in a temporary directory) when
`REFLEXIO_LAKE` is not set; `tests/test_notebooks.py` builds it once for their execution tests.

What it contains (all conversations are synthetic, written for this project; nothing is downloaded):

- the five bundled demo conversations (`reflexio_pipelines/demo/sample_conversations.json`) on the first day;
- six days of an ops agent's sessions, landed at 10:00 UTC each day: agent version `ops-agent-1.2` for three days,
  then `ops-agent-1.3`. Users correct the agent (deploy region, commit-message language, credential rotation),
  thank it, or give up and ask for a human. Version 1.3 fails less often, and some of its turns carry
  `shadow_content` (an alternative answer to the same request: the old habit, a better answer, or an equivalent one),
  so there are head-to-head comparisons with all three outcomes;
- learned 1.3 playbooks served by the real service (`POST /api/search`), which logs their first retrieval, followed
  by a few more, mostly successful 1.3 sessions — so `impact_before_after` has a before and an after side.

The numbers are designed, not observed: the sample illustrates the analyses, it is no evidence that learning helps.

How it is built — every step is the production code path, in-process:
turns are committed by the service's group-commit `LandingWriter` (its clock pinned to each sample day, which is
what decides the ingest window), then `runs.launch` (one Dagster `extract_job` run per window + `index_job`),
`runs.run_aggregation` (agent playbooks), the FastAPI app through `TestClient` (approve a playbook, search), and
`runs.run_evaluation` with every session sampled (the default is 5 %) and the HEURISTIC judge (no LLM configured).
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from datetime import datetime, timedelta, timezone
from pathlib import Path

SAMPLE_DAYS = 6
VERSIONS = ("ops-agent-1.2", "ops-agent-1.3")
EVALUATION_NAME = "ops_success"

# (request, wrong answer, correction) — one lesson per list, several wordings by different users.
REGION = [
    (
        "Please deploy the payments service.",
        "Deploying the payments service to us-east-1.",
        "No — we never deploy to us-east-1, always use us-west-2.",
    ),
    (
        "Deploy the billing service to production.",
        "Deploying the billing service to us-east-1 now.",
        "No, never deploy to us-east-1; use us-west-2 instead.",
    ),
    (
        "Can you deploy the search service?",
        "Sure, deploying the search service in us-east-1.",
        "Wrong region: never us-east-1, always deploy to us-west-2.",
    ),
]
COMMITS = [
    (
        "Write the commit message for this fix.",
        "Commit: arreglado el error de login.",
        "No, always write commit messages in English.",
    ),
    (
        "Commit these changes with a message.",
        "Commit: corrige le bug de connexion.",
        "No — commit messages must always be in English.",
    ),
]
GOOD = [
    ("user", "Please rotate the reporting credentials."),
    ("assistant", "Done: a second credential was issued in the vault and the service rolled onto it."),
    ("user", "Perfect, thanks!"),
]
BAD = [
    ("user", "Please rotate the reporting credentials."),
    ("assistant", "I changed the password and restarted the database."),
    ("user", "No, that's wrong — never restart the database for a rotation."),
    ("assistant", "Sorry, restarting it again now."),
    ("user", "It's down now. Let me talk to a human."),
]
# Shadow answers (`shadow_content`: what another version would have said on the same turn), per session kind.
SHADOW = {
    "good": "I changed the password and restarted the database.",  # the old habit: the regular answer is better
    "bad": "Rotated the reporting credentials: a new credential in the vault, no database restart.",  # shadow better
}  # region sessions: the regular answer with the right region, which covers the same request words (a tie)
# Users of each version (a user who already taught 1.2 a lesson would not teach it again: repeats are not re-learned).
USERS = {
    VERSIONS[0]: ["ann", "ben", "cat", "dev", "eli", "fay", "gus", "hal"],
    VERSIONS[1]: ["ivy", "jon", "kim", "lea", "max", "ned", "oli", "pam"],
}


def _conversation(
    kind: str, user: str, version: str, session: str, at: datetime, case: int = 0, shadow: bool = False
) -> dict:
    if kind in ("region", "commit"):  # corrected once, then the agent gets it right and the user approves
        lessons = REGION if kind == "region" else COMMITS
        request, answer, correction = lessons[case % len(lessons)]
        turns = [
            ("user", request),
            ("assistant", answer),
            ("user", correction),
            ("assistant", "Understood, done that way."),
            ("user", "Thanks, that works."),
        ]
    else:
        turns = GOOD if kind == "good" else BAD
    interactions = []
    for i, (role, text) in enumerate(turns):
        interactions.append(
            {"role": role, "content": text, "created_at": int((at + timedelta(seconds=20 * i)).timestamp())}
        )
    if shadow and kind in SHADOW:
        interactions[1]["shadow_content"] = SHADOW[kind]
    elif shadow and kind == "region":
        interactions[1]["shadow_content"] = interactions[1]["content"].replace("us-east-1", "us-west-2")
    return {
        "id": session,
        "user_id": user,
        "session_id": session,
        "agent_version": version,
        "source": "sample",
        "interactions": interactions,
    }


def day_conversations(day: int, start: datetime) -> list[dict]:
    """The synthetic sessions of sample day `day` (0-based): 1.2 has more corrections and failures than 1.3."""
    version = VERSIONS[0] if day < SAMPLE_DAYS // 2 else VERSIONS[1]
    newer = version == VERSIONS[1]
    # per day: (kind, how many); 1.2 fails more, 1.3 mostly succeeds
    plan = (
        [("region", 2), ("commit", 1), ("good", 1), ("bad", 4)]
        if not newer
        else [("region", 1), ("commit", 1 if day % 2 else 0), ("good", 3), ("bad", 2)]
    )
    out, n = [], 0
    for kind, count in plan:
        for _ in range(count):
            user = USERS[version][(day * 3 + n) % len(USERS[version])]
            at = start + timedelta(minutes=2 * n)
            out.append(
                _conversation(kind, user, version, f"d{day}-{kind}-{n}", at, case=day + n, shadow=newer and n % 2 == 0)
            )
            n += 1
    return out


def land(lake, conversations: list[dict], at: datetime | None = None) -> list[str]:
    """Commit conversations through the service's group-commit writer, its clock pinned to `at` (default: now).

    The same code path as `POST /api/publish_interaction`; pinning the clock is what lets a sample span days."""
    from reflexio_pipelines.demo.run import publish_payload
    from serving.landing import LandingWriter
    from serving.models.publish import PublishUserInteractionRequest
    from serving.routers.publish import landing_rows

    writer = LandingWriter(lake, clock=(lambda: at) if at else (lambda: datetime.now(timezone.utc)))
    writer.start()
    try:
        futures = []
        for conversation in conversations:
            body = PublishUserInteractionRequest.model_validate(publish_payload(conversation))
            request_id = f"sample-{conversation['id']}-{uuid.uuid4().hex[:6]}"
            futures.append(writer.submit(request_id, landing_rows(body, request_id), f"sample-{conversation['id']}"))
        return [f.result(timeout=60).request_id for f in futures]
    finally:
        writer.close()


def build_sample_lake(root: str | Path, instance=None, log=print) -> dict:
    """Build and materialise the sample lake at `root` (must be empty or absent). Returns a summary.

    `instance`: the Dagster instance to record runs in (default: the one at $DAGSTER_HOME)."""
    from fastapi.testclient import TestClient

    from reflexio_pipelines.demo.run import sample_conversations
    from reflexio_pipelines.lake.io import Lake
    from reflexio_pipelines.runs import launch, run_aggregation, run_evaluation
    from reflexio_pipelines.settings import Settings
    from serving.app import create_app

    started = time.monotonic()
    root = Path(root).expanduser().resolve()
    if root.exists() and any(root.iterdir()):
        raise FileExistsError(f"{root} is not empty: the sample lake is built into a fresh directory")
    lake = Lake.at(root)
    # Evaluate every closed session (the default samples 5 %); the file sits next to the lake, not in it.
    config = root.parent / f"{root.name}-extraction.json"
    config.write_text(
        json.dumps({"agent_success_configs": [{"evaluation_name": EVALUATION_NAME, "sampling_rate": 1.0}]})
    )
    settings = Settings(lake=str(root), extraction_config=str(config))

    today = datetime.now(timezone.utc).replace(hour=0, minute=0, second=0, microsecond=0)
    first_day = today - timedelta(days=SAMPLE_DAYS)
    for day in range(SAMPLE_DAYS):
        at = first_day + timedelta(days=day, hours=10)
        conversations = day_conversations(day, at)
        if day == 0:  # the bundled demo conversations, stamped on the first day
            demo = json.loads(json.dumps(sample_conversations()))
            for c in demo:
                for i, turn in enumerate(c["interactions"]):
                    turn["created_at"] = int((at - timedelta(minutes=30) + timedelta(seconds=20 * i)).timestamp())
            conversations = demo + conversations
        land(lake, conversations, at=at)
    learned = launch(settings=settings, instance=instance)
    log(f"materialised {len(learned.partition_keys)} windows")
    aggregation = run_aggregation({}, settings=settings, instance=instance)
    log(f"aggregation: {aggregation}")

    # A loopback Host: the open service refuses other names (TestClient's default is "testserver").
    with TestClient(create_app(settings), base_url="http://localhost") as client:
        rules = client.post("/api/get_agent_playbooks", json={"agent_version": VERSIONS[0]}).json()["agent_playbooks"]
        region = next((r for r in rules if "us-west-2" in r["content"]), None)
        if region is not None:  # a reviewer approves the region rule (control_log)
            client.put(
                "/api/update_agent_playbook_status",
                json={"agent_playbook_id": region["agent_playbook_id"], "playbook_status": "approved"},
            )
        # The 1.3 agent retrieves what a user taught it, for that user (a search without a user id serves no user's
        # items): the service logs the first retrieval (`retrievals`).
        taught = client.post("/api/get_user_playbooks", json={"agent_version": VERSIONS[1]}).json()["user_playbooks"]
        teacher = next((p["user_id"] for p in taught if "restart" in p["content"].lower()), USERS[VERSIONS[1]][0])
        hits = client.post(
            "/api/search",
            json={
                "query": "rotate credentials restart database",
                "threshold": 0.0,
                "agent_version": VERSIONS[1],
                "user_id": teacher,
            },
        ).json()
    served = lake.read_table("retrievals").to_pylist()
    if not served:
        raise RuntimeError(f"the service served no learned playbook of {VERSIONS[1]}: {hits}")
    first_served = min(r["first_served_at"] for r in served)
    log(f"search served {len(hits['user_playbooks'])} user playbooks; first retrieval logged at {first_served}")

    # After the first retrieval: a few more 1.3 sessions (stamped just after it), mostly successful.
    after = datetime.fromtimestamp(first_served + 1, timezone.utc)
    later = [
        _conversation("bad" if i == 0 else "good", user, VERSIONS[1], f"after-{i}", after + timedelta(seconds=3 * i))
        for i, user in enumerate(USERS[VERSIONS[1]])
    ]
    land(lake, later)
    launch(settings=settings, instance=instance)
    # Sessions close after 10 quiet minutes: evaluate "as of" one hour after the newest session, so all are closed.
    evaluation = run_evaluation(now=int(after.timestamp()) + 3600, settings=settings, instance=instance)
    log(f"evaluation: {evaluation}")
    return {
        "lake": str(root),
        "windows": len(learned.partition_keys),
        "aggregation": aggregation,
        "evaluation": evaluation,
        "first_retrieval_at": first_served,
        "seconds": round(time.monotonic() - started, 1),
    }


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python notebooks/sample_lake.py NEW_LAKE_DIR")
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from reflexio_pipelines.runs import default_instance

    print(build_sample_lake(sys.argv[1], instance=default_instance()))

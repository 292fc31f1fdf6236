"""SIMULATION — a closed-loop benchmark of self-improvement: does an agent that reads Reflexio's learned context
stop repeating the mistakes its users corrected, compared with the holdout control group that gets none?

Everything here is simulated except Reflexio itself. The users, their hidden preferences, the agent and its token
counts are deterministic stand-ins (seeded); the service, the pipeline (learning, index, evaluation, outcome
counters, impact metrics) and the SDK are the real ones, on a fresh lake on this machine with the built-in
extractor — so the numbers say how the loop behaves on this simulated population, not how a real agent or a real
LLM extractor would do.

- **Simulated users** (`--users`, default 40): each has a hidden deploy region it insists on (never the agent's
  default us-east-1) and a tool constraint (the `create_issue` tool fails with 403 unless called with the user's
  own token). Each round every user runs one session with one task: deploy a service, or open a ticket.
- **The simulated agent** is deterministic and follows the learned context it is given: before answering it calls
  the SDK's `context()` (naming the session); a region it finds in a rule ("always use us-west-2") is where it
  deploys, a working `token` in a tool rule is what it calls `create_issue` with; otherwise it uses its defaults.
- **The user corrects** the agent whenever it violates a preference ("No — we never deploy to us-east-1, always use
  eu-central-1.", or "Use the token bot-7 for create_issue.") after a failed call), then thanks it once it is right.
- **Treated vs control** is the real holdout: `holdout.agent_versions` puts half of the simulated users in the
  control group (`--control-share`), which Reflexio answers with no learned context.
- After every round the sessions are published, a learning run materialises them and the service swaps to the new
  index; at the end the evaluation job judges every session and computes the outcome counters and recurrence.

Reported per round and arm, each with a 95 % interval: corrections per session (t interval), the agent's steps per
task (tool calls + answers) and simulated tokens per task (prompt incl. the learned context + completion, 4 chars
per token); correction recurrence for the treated arm (Wilson, from the pipeline's `session_outcomes`); the
pipeline's own `impact_holdout` rows.

    .venv/bin/python -m benchmarks.self_improvement [--users 40] [--rounds 6] [--control-share 0.5] [--seed 7]
                                                    [--out benchmarks/results/self_improvement.json]

Writes benchmarks/results/self_improvement.json (or `--out`); the lake lives in a temporary directory, deleted at
the end. Runs in-process on 127.0.0.1 (about a minute at the defaults on two
shared cores).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import re
import shutil
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks._common import make_dagster_home  # importing reflexio_pipelines keeps LiteLLM and onnxruntime offline
from reflexio_pipelines.learning.config import HoldoutSettings
from reflexio_pipelines.learning.holdout import CONTROL, arm_of
from reflexio_pipelines.learning.stats import mean_interval, wilson

AGENT = "sim-agent-1"
REGIONS = ("us-west-2", "eu-central-1", "eu-west-1", "ap-south-1", "ca-central-1")
DEFAULT_REGION = "us-east-1"
SERVICES = ("payments", "billing", "search", "checkout", "reporting", "gateway")
REPOS = ("infra", "platform", "data", "web")
RESULTS = Path(__file__).resolve().parent / "results" / "self_improvement.json"
_REGION_RE = re.compile(r"\b(?:always use|use|to)\s+((?:us|eu|ap|ca)-[a-z]+-\d)\b", re.I)
_TOKEN_RE = re.compile(r'"token":\s*"([^"]+)"')


@dataclass(frozen=True)
class SimUser:
    """A simulated user: the region they insist on and the token their create_issue calls need."""

    user_id: str
    region: str
    token: str


@dataclass
class SessionLog:
    """What one simulated session did (the benchmark's own measurements)."""

    user_id: str
    arm: str
    round: int
    task: str
    corrections: int
    steps: int
    tokens: int
    context_chars: int


def _tokens(*texts: str) -> int:
    return sum(math.ceil(len(t) / 4) for t in texts)


def simulate_session(
    user: SimUser, round_no: int, task: str, context: str, rng: random.Random
) -> tuple[list[dict], SessionLog]:
    """One session of the simulated agent with the simulated user; returns its turns and its log."""
    turns: list[dict] = []
    steps = corrections = 0
    prompt = f"system: you are an ops agent.\n{context}\n"
    completion = ""
    if task == "deploy":
        service = rng.choice(SERVICES)
        request = f"Please deploy the {service} service to production."
        turns.append({"role": "user", "content": request})
        regions = [m.group(1) for m in _REGION_RE.finditer(context) if m.group(1) != DEFAULT_REGION]
        region = regions[0] if regions else DEFAULT_REGION  # follows the learned context, else its default
        answer = f"Deploying the {service} service to {region}."
        turns.append({"role": "assistant", "content": answer})
        steps, completion = 1, answer
        if region != user.region:
            corrections += 1
            turns.append({"role": "user", "content": f"No — we never deploy to {region}, always use {user.region}."})
            retry = f"Understood, deploying the {service} service to {user.region} instead."
            turns.append({"role": "assistant", "content": retry})
            steps, completion = steps + 1, completion + retry
            prompt += request + answer
    else:
        repo = rng.choice(REPOS)
        request = f"Open a ticket in the {repo} repo about the flaky nightly job."
        turns.append({"role": "user", "content": request})
        learned = _TOKEN_RE.findall(context)
        token = learned[0] if learned else None
        if token != user.token:
            failed = {
                "tool_name": "create_issue",
                "tool_data": {
                    "input": {"repo": repo, "title": "Flaky nightly job"},
                    "error": "403 Forbidden: token lacks the issues:write scope",
                },
            }
            answer = "I tried to open the ticket but the tracker rejected the request."
            turns.append({"role": "assistant", "content": answer, "tools_used": [failed]})
            corrections += 1
            turns.append({"role": "user", "content": f"No, always use the {user.token} token for create_issue."})
            steps, completion, prompt = 1, answer, prompt + request + answer
        done = {
            "tool_name": "create_issue",
            "tool_data": {
                "input": {"repo": repo, "title": "Flaky nightly job", "token": user.token},
                "output": f"{repo}#17",
            },
        }
        answer = f"Opened {repo}#17."
        turns.append({"role": "assistant", "content": answer, "tools_used": [done]})
        steps, completion = steps + 1, completion + answer
    turns.append({"role": "user", "content": "Perfect, thanks!"})
    log = SessionLog(user.user_id, "", round_no, task, corrections, steps, _tokens(prompt, completion), len(context))
    return turns, log


def _mean_ci(values: list[float]) -> dict:
    """Mean with its 95 % t interval."""
    mean, low, high = mean_interval(values)
    return {"mean": mean, "ci": [low, high], "n": len(values)}


def run(users_n: int, rounds: int, control_share: float, seed: int, out: Path = RESULTS) -> dict:
    """Run the simulation on a fresh lake in a temporary directory (deleted afterwards); returns the report."""

    rng = random.Random(seed)
    work = Path(tempfile.mkdtemp(prefix="reflexio-selfimprove-"))
    try:
        return _run(work, rng, users_n, rounds, control_share, seed, out)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run(work: Path, rng: random.Random, users_n: int, rounds: int, control_share: float, seed: int, out: Path) -> dict:
    from reflexio_pipelines.devtools.servers import serve_app
    from reflexio_pipelines.lake.io import Lake
    from reflexio_pipelines.runs import launch, run_evaluation
    from reflexio_pipelines.sdk import ReflexioClient
    from reflexio_pipelines.settings import Settings
    from serving.app import create_app

    os.environ["DAGSTER_HOME"] = str(make_dagster_home(work / "dagster_home"))
    config = work / "config.json"
    holdout = {"agent_versions": {AGENT: control_share}}
    config.write_text(
        json.dumps({"holdout": holdout, "agent_success_configs": [{"evaluation_name": "sim", "sampling_rate": 1.0}]})
    )
    settings = Settings(lake=str(work / "lake"), extraction_config=str(config))
    users = [SimUser(f"sim-{i:03d}", rng.choice(REGIONS), f"bot-{rng.randrange(100)}") for i in range(users_n)]
    arms = {u.user_id: arm_of(HoldoutSettings(**holdout), AGENT, u.user_id) for u in users}
    logs: list[SessionLog] = []
    started = time.monotonic()
    with serve_app(create_app(settings)) as url, ReflexioClient(url) as client:
        for round_no in range(rounds):
            for index, user in enumerate(users):
                task = "deploy" if (round_no + index) % 2 == 0 else "ticket"  # each user alternates its two tasks
                session = f"{user.user_id}-r{round_no}"
                query = "deploy a service to production" if task == "deploy" else "open a ticket with create_issue"
                context = client.context(query, user_id=user.user_id, agent_version=AGENT, session_id=session)
                turns, log = simulate_session(user, round_no, task, context, rng)
                log.arm = arms[user.user_id]
                logs.append(log)
                client.publish(user.user_id, turns, agent_version=AGENT, session_id=session, source="simulation")
            result = launch(settings=settings)
            deadline = time.monotonic() + 60
            while httpx.get(f"{url}/health").json().get("index_version") != result.index_version:
                if time.monotonic() > deadline:
                    raise RuntimeError("the service did not swap to the new index")
                time.sleep(0.2)
            print(
                f"round {round_no + 1}/{rounds}: {len(users)} sessions, learned, index {result.index_version}",
                flush=True,
            )
        time.sleep(1.0)  # the retrieval log is flushed every poll
    run_evaluation(now=int(time.time()) + 3600, settings=settings)
    lake = Lake.at(settings.lake)
    outcomes = lake.read_table("session_outcomes").to_pylist()
    holdout_rows = [r for r in lake.read_table("impact_holdout").to_pylist() if r["agent_version"] == AGENT]
    return report(
        logs,
        outcomes,
        holdout_rows,
        rounds,
        time.monotonic() - started,
        {"users": users_n, "rounds": rounds, "control_share": control_share, "seed": seed},
        out,
    )


def report(
    logs: list[SessionLog],
    outcomes: list[dict],
    holdout_rows: list[dict],
    rounds: int,
    seconds: float,
    params: dict,
    path: Path = RESULTS,
) -> dict:
    per_round: dict[str, list[dict]] = {"treated": [], "control": []}
    for arm in per_round:
        for r in range(rounds):
            chosen = [s for s in logs if s.arm == arm and s.round == r]
            per_round[arm].append(
                {
                    "round": r + 1,
                    "corrections_per_session": _mean_ci([s.corrections for s in chosen]),
                    "steps_per_task": _mean_ci([s.steps for s in chosen]),
                    "tokens_per_task": _mean_ci([s.tokens for s in chosen]),
                }
            )
    recurrence = {}
    for arm in ("treated", "control"):
        rows = [o for o in outcomes if (o["arm"] == CONTROL) == (arm == "control") and o["agent_version"] == AGENT]
        corrections = sum(o["corrections"] or 0 for o in rows)
        recurring = sum(o["recurring_corrections"] or 0 for o in rows)
        repeated = sum(o["repeated_learned_corrections"] or 0 for o in rows)
        recurrence[arm] = {
            "corrections": corrections,
            "recurring": recurring,
            "recurrence": round(recurring / corrections, 4) if corrections else None,
            "recurrence_ci": list(wilson(recurring, corrections)),
            "repeats_of_learned_lessons": repeated,
            "repeat_share": round(repeated / corrections, 4) if corrections else None,
            "repeat_share_ci": list(wilson(repeated, corrections)),
        }
    out = {
        "label": "SIMULATION: simulated users and agent, real Reflexio service and pipeline",
        "params": params,
        "seconds": round(seconds, 1),
        "per_round": per_round,
        "recurrence": recurrence,
        "impact_holdout": holdout_rows,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(out, indent=2))
    print("\nSIMULATION — simulated users and a deterministic simulated agent; Reflexio itself is real.")
    print(
        f"{params['users']} users, {rounds} rounds, control share {params['control_share']}, seed {params['seed']}, "
        f"{seconds:.0f} s"
    )
    print("\ncorrections per session (95 % CI) by round")
    for r in range(rounds):
        cells = []
        for arm in ("treated", "control"):
            c = per_round[arm][r]["corrections_per_session"]
            cells.append(f"{arm} {c['mean']} [{_f(c['ci'][0])}, {_f(c['ci'][1])}] n={c['n']}")
        print(f"  round {r + 1}: " + "   ".join(cells))
    for metric in ("steps_per_task", "tokens_per_task"):
        print(f"\n{metric.replace('_', ' ')} (95 % CI), first and last round")
        for arm in ("treated", "control"):
            first, last = per_round[arm][0][metric], per_round[arm][-1][metric]
            print(
                f"  {arm}: {first['mean']} [{_f(first['ci'][0])}, {_f(first['ci'][1])}] -> "
                f"{last['mean']} [{_f(last['ci'][0])}, {_f(last['ci'][1])}]"
            )
    print("\ncorrection recurrence (pipeline, heuristic matching; Wilson 95 % CI)")
    for arm, r in recurrence.items():
        print(
            f"  {arm}: {r['recurring']}/{r['corrections']} = {r['recurrence']} {r['recurrence_ci']}; repeats of "
            f"lessons already learned (served or not): {r['repeats_of_learned_lessons']} = {r['repeat_share']} "
            f"{r['repeat_share_ci']}"
        )
    print("\nimpact_holdout (treated − control, 95 % CI)")
    for r in holdout_rows:
        print(
            f"  {r['metric']:<26} {r['evaluation_name']}/{r['judge']}: {_f(r['treated_value'])} vs "
            f"{_f(r['control_value'])}, diff {_f(r['difference'])} [{_f(r['ci_low'])}, {_f(r['ci_high'])}]"
        )
    print(f"\nwritten to {path}")
    return out


def _f(value: float | None) -> str:
    return "—" if value is None else f"{value:.3f}"


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--control-share", type=float, default=0.5)
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    return run(args.users, args.rounds, args.control_share, args.seed, args.out)


if __name__ == "__main__":
    main()

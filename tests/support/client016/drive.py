"""Every public method of reflexio-client 0.2.16, called once against a live service, each answer checked.

Runs in the Python 3.12 venv that holds the real client (tests/support/py312.py, requirements.txt beside this file);
it imports nothing of this project. The service must hold the lake `tests/support/learned.py` `serve_learned` makes
(users ann, bob and cat taught the same region correction, one agent playbook, the stated facts of `facts_user`).

    python drive.py '{"url": "http://127.0.0.1:8081", "agent": "ops-1", "agent_playbook_id": 7,
                      "facts_user": "frank", "query": "which region to deploy to"}'

Prints one JSON object a line per client method, in call order: {"method", "status", "detail"} where status is
`ok` (2xx, the client parsed the answer and it is the correct one), `missing` (the route does not exist: 404 from
the router or 405) or `error` (anything else: a 4xx/5xx, an answer the client cannot parse, a wrong answer). The
calls run in one order on one lake (reads, then writes, then deletes), so a failed step may fail later ones too. The steps are in steps_reads.py, steps_writes.py and steps_deletes.py
(imported in that order, which is the call order).
"""

from __future__ import annotations

import inspect
import json
import sys
import traceback

import requests
import steps_deletes
import steps_reads
import steps_writes
from harness import STEPS, Run, is_missing_route
from reflexio import ReflexioClient

#: The step modules in call order: reads first, deletes last.
STEP_MODULES = (steps_reads, steps_writes, steps_deletes)


# -- running ----------------------------------------------------------------------------------------------------------


def public_methods() -> list[str]:
    return sorted(n for n, v in inspect.getmembers(ReflexioClient) if not n.startswith("_") and callable(v))


def classify(exc: BaseException) -> tuple[str, str]:
    """(status, detail) of a step that raised."""
    if isinstance(exc, requests.HTTPError) and exc.response is not None:
        answer = exc.response
        return (
            "missing" if is_missing_route(answer) else "error"
        ), f"HTTP {answer.status_code} {answer.request.method} {answer.request.path_url}: {answer.text[:300]}"
    if isinstance(exc, AssertionError):
        return "error", f"wrong answer: {str(exc)[:400]}"
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return "error", f"{type(exc).__name__}: {str(exc)[:400]} (at {where.filename.rsplit('/', 1)[-1]}:{where.lineno})"


def main(argv: list[str]) -> int:
    seed = json.loads(argv[1])
    run = Run(
        client=ReflexioClient(url_endpoint=seed["url"] + "/", timeout=600),
        agent=seed["agent"],
        agent_playbook_id=int(seed["agent_playbook_id"]),
        facts_user=seed["facts_user"],
        query=seed["query"],
    )
    steps = [step for module in STEP_MODULES for step in STEPS[module.__name__]]
    for method, step in steps:
        try:
            step(run)
            status, detail = "ok", ""
        except Exception as exc:  # every failure is reported, the next step still runs
            status, detail = classify(exc)
        print(json.dumps({"method": method, "status": status, "detail": detail}), flush=True)
    for method in sorted(set(public_methods()) - {m for m, _ in steps}):
        print(json.dumps({"method": method, "status": "error", "detail": "no step of the driver calls it"}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""The evaluation tables in the lake: `session_evaluations` + `shadow_comparisons`, appended by every evaluation run
(each session judged once per evaluator, learning/evaluation.py), and the impact tables (`impact_metrics`,
`impact_before_after`, `impact_holdout`), recomputed from them on every run (learning/impact.py).
assets/evaluation.py wires these to its config and resources.
"""

from __future__ import annotations

from dataclasses import dataclass

import pyarrow as pa

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.learning.impact import compute_before_after, compute_holdout, compute_impact

#: Serialises the evaluation and impact tables' writers (privacy/erasure.WRITER_LOCKS).
LOCK = "evaluations"


def evaluated_ids(store: Lake) -> set[str]:
    """The result ids in `session_evaluations`: the (evaluator, session) pairs judged already."""
    return set(store.read_table("session_evaluations").column("result_id").to_pylist())


def append_evaluations(store: Lake, results: list[dict], pairs: list[dict]) -> list[dict]:
    """Append the evaluation rows no racing run wrote meanwhile, and the shadow comparisons of their sessions;
    returns the evaluation rows appended."""
    with store.lock(LOCK):
        fresh_done = evaluated_ids(store)
        results = [r for r in results if r["result_id"] not in fresh_done]  # a racing run already wrote them
        if results:
            store.append("session_evaluations", pa.Table.from_pylist(results, schema=TABLES["session_evaluations"]))
            kept = {r["session_id"] for r in results}
            shadow = [p for p in pairs if p["session_id"] in kept]
            if shadow:
                store.append("shadow_comparisons", pa.Table.from_pylist(shadow, schema=TABLES["shadow_comparisons"]))
    return results


@dataclass(frozen=True)
class Impact:
    """The impact tables' rows as written, and the `impact_metrics` version."""

    metrics: list[dict]
    before_after: list[dict]
    holdout: list[dict]
    version: int


def write_impact(store: Lake) -> Impact:
    """Recompute the impact tables from the evaluation, outcome, aggregation, control and retrieval tables and
    replace them."""
    evaluations = store.read_table("session_evaluations").to_pylist()
    outcomes = store.read_table("session_outcomes").to_pylist()
    rows = compute_impact(
        evaluations,
        store.read_table("shadow_comparisons").to_pylist(),
        outcomes,
        store.read_table("agent_playbooks").to_pylist(),
        store.read_table("control_log").to_pylist(),
    )
    before_after = compute_before_after(store.read_table("retrievals").to_pylist(), evaluations)
    holdout = compute_holdout(outcomes, evaluations)
    with store.lock(LOCK):
        version = store.replace_where(
            "impact_metrics", None, pa.Table.from_pylist(rows, schema=TABLES["impact_metrics"])
        )
        store.replace_where(
            "impact_before_after", None, pa.Table.from_pylist(before_after, schema=TABLES["impact_before_after"])
        )
        store.replace_where("impact_holdout", None, pa.Table.from_pylist(holdout, schema=TABLES["impact_holdout"]))
    return Impact(rows, before_after, holdout, version)

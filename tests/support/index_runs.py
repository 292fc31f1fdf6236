"""Index builds as the sensors run them, for tests."""

from __future__ import annotations

from typing import Any


def index_turns(settings: Any, instance: Any) -> dict[str, Any]:
    """What `interaction_index_sensor`'s runs do: `index_job` with `index_turns`, in-process, its blocking check
    asserted to pass; returns the `search_index` materialisation's metadata."""
    from reflexio_pipelines.definitions import build_definitions

    run = (
        build_definitions(settings)
        .resolve_job_def("index_job")
        .execute_in_process(instance=instance, run_config={"ops": {"search_index": {"config": {"index_turns": True}}}})
    )
    assert run.success
    checks = [e.asset_check_evaluation_data for e in run.all_events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    assert checks and all(c.passed for c in checks), [c.metadata for c in checks]
    (mat,) = run.asset_materializations_for_node("search_index")
    return {k: v.value for k, v in mat.metadata.items()}

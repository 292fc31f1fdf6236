"""Steps, second part: evaluation and experiments, pending tool calls, manual adds and edits, generation."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from harness import PUBLISHER, SESSION, Run, covers, expect, http_refusal, now_s
from reflexio.models.api_schema.domain.entities import (
    AgentPlaybook,
    ManualPlaybookGenerationRequest,
    ManualProfileGenerationRequest,
    UserPlaybook,
)
from reflexio.models.api_schema.domain.enums import PlaybookStatus

# -- evaluation and experiments ---------------------------------------------------------------------------------------


@covers("grade_on_demand")
def _grade(run: Run) -> None:
    graded = run.client.grade_on_demand(session_id=SESSION, agent_version=run.agent)
    expect(graded.session_id == SESSION and graded.result_id is not None and not graded.skipped_reason, f"{graded}")
    run.found["result_id"] = graded.result_id


@covers("get_agent_success_evaluation_results")
def _evaluation_results(run: Run) -> None:
    results = run.client.get_agent_success_evaluation_results(limit=100, agent_version=run.agent)
    expect(SESSION in [r.session_id for r in results.agent_success_evaluation_results], f"{results}")


@covers("get_retrieved_learning_evaluation_results")
def _retrieved_learning_results(run: Run) -> None:
    results = run.client.get_retrieved_learning_evaluation_results(user_id=PUBLISHER, limit=100)
    expect(results.success, f"{results}")


@covers("regenerate_evaluations")
def _regenerate(run: Run) -> None:
    started = run.client.regenerate_evaluations(from_ts=now_s() - 86_400, to_ts=now_s() + 60)
    expect(started.job_id and started.total >= 1, f"{started}")
    run.found["job_id"] = started.job_id


@covers("get_evaluation_regeneration_status")
def _regeneration_status(run: Run) -> None:
    status = run.client.get_evaluation_regeneration_status(run.found["job_id"])
    expect(status.job_id == run.found["job_id"] and status.status in ("running", "completed", "cancelled"), f"{status}")


@covers("cancel_evaluation_regeneration")
def _cancel_regeneration(run: Run) -> None:
    answer = run.client.cancel_evaluation_regeneration(run.found["job_id"])
    expect(isinstance(answer, dict) and answer.get("job_id") == run.found["job_id"], f"{answer}")
    # A job still running is cancelled; one already finished keeps its final status, and the poll agrees.
    status = run.client.get_evaluation_regeneration_status(run.found["job_id"])
    expect(answer.get("status") in ("cancelled", "completed") and status.status == answer["status"], f"{answer}")


@covers("list_retrieval_experiments")
def _list_experiments(run: Run) -> None:
    listed = run.client.list_retrieval_experiments()
    expect(listed.active_experiment is None, f"{listed}")


@covers("start_retrieval_experiment")
def _start_experiment(run: Run) -> None:
    started = run.client.start_retrieval_experiment("c016-exp", 20.0)
    active = started.active_experiment
    expect(active is not None and (active.experiment_id, active.holdout_percentage) == ("c016-exp", 20.0), f"{started}")


@covers("get_retrieval_experiment_results")
def _experiment_results(run: Run) -> None:
    results = run.client.get_retrieval_experiment_results("c016-exp")
    expect(results.experiment.experiment_id == "c016-exp", f"{results}")
    expect((results.treatment.arm, results.holdout.arm) == ("treatment", "holdout"), f"{results}")


@covers("stop_retrieval_experiment")
def _stop_experiment(run: Run) -> None:
    stopped = run.client.stop_retrieval_experiment("c016-exp")
    history = {e.experiment_id: e for e in stopped.experiments}
    expect(stopped.active_experiment is None and history["c016-exp"].ended_at is not None, f"{stopped}")


# -- pending tool calls: this service's extraction never asks a human, so there are none ------------------------------


@covers("list_pending_tool_calls")
def _list_pending(run: Run) -> None:
    expect(run.client.list_pending_tool_calls().pending_tool_calls == [], "pending tool calls listed")


def _no_such_call(call: Callable[[], Any]) -> None:
    refused = http_refusal(call)
    expect(refused.status_code == 404 and "Pending tool call not found" in refused.text, f"{refused.text}")


@covers("get_pending_tool_call")
def _get_pending(run: Run) -> None:
    _no_such_call(lambda: run.client.get_pending_tool_call("ptc-none"))


@covers("resolve_pending_tool_call")
def _resolve_pending(run: Run) -> None:
    _no_such_call(lambda: run.client.resolve_pending_tool_call("ptc-none", answer="yes"))


@covers("update_pending_tool_call_answer")
def _answer_pending(run: Run) -> None:
    _no_such_call(lambda: run.client.update_pending_tool_call_answer("ptc-none", "yes"))


@covers("mark_pending_tool_call_not_applicable")
def _not_applicable(run: Run) -> None:
    _no_such_call(lambda: run.client.mark_pending_tool_call_not_applicable("ptc-none"))


@covers("cancel_pending_tool_call")
def _cancel_pending(run: Run) -> None:
    _no_such_call(lambda: run.client.cancel_pending_tool_call("ptc-none"))


# -- manual adds and edits --------------------------------------------------------------------------------------------


@covers("add_user_playbook")
def _add_user_playbook(run: Run) -> None:
    added = run.client.add_user_playbook(
        [
            UserPlaybook(
                user_id=PUBLISHER, agent_version=run.agent, request_id="manual", content="Quote prices in euros."
            )
        ]
    )
    expect(added.success and added.added_count == 1, f"{added}")
    found = run.client.search_user_playbooks(query="prices in euros", user_id=PUBLISHER)
    expect("Quote prices in euros." in [p.content for p in found.user_playbooks], "the next search misses it")


@covers("add_agent_playbooks")
def _add_agent_playbooks(run: Run) -> None:
    added = run.client.add_agent_playbooks([AgentPlaybook(agent_version=run.agent, content="Confirm before deleting.")])
    expect(added.success and added.added_count == 1, f"{added}")
    listed = run.client.get_agent_playbooks(agent_version=run.agent, force_refresh=True).agent_playbooks
    (manual,) = [p for p in listed if p.content == "Confirm before deleting."]
    run.found["manual_agent_playbook"] = manual.agent_playbook_id


@covers("add_user_profile")
def _add_user_profile(run: Run) -> None:
    added = run.client.add_user_profile([{"user_id": PUBLISHER, "content": "Works from Lisbon."}])
    expect(added.success and added.added_count == 1, f"{added}")
    found = run.client.search_profiles(user_id=PUBLISHER, query="Lisbon")
    expect([p.content for p in found.user_profiles] == ["Works from Lisbon."], f"{found}")


@covers("update_user_playbook")
def _update_user_playbook(run: Run) -> None:
    pid = run.found["ann_playbook"].user_playbook_id
    edited = run.client.update_user_playbook(pid, content="Deploy to us-west-2 only.", trigger="deploying a service")
    expect(edited.success, f"{edited}")
    (back,) = [p for p in run.client.get_user_playbooks(user_id="ann").user_playbooks if p.user_playbook_id == pid]
    expect((back.content, back.trigger) == ("Deploy to us-west-2 only.", "deploying a service"), f"{back}")


@covers("update_agent_playbook")
def _update_agent_playbook(run: Run) -> None:
    pid = run.found["manual_agent_playbook"]
    expect(run.client.update_agent_playbook(pid, content="Confirm before deleting data.").success, "not edited")
    listed = run.client.get_agent_playbooks(agent_version=run.agent, force_refresh=True).agent_playbooks
    expect({p.agent_playbook_id: p.content for p in listed}[pid] == "Confirm before deleting data.", "edit not read")


@covers("update_agent_playbook_status")
def _update_status(run: Run) -> None:
    pid = run.found["manual_agent_playbook"]
    expect(run.client.update_agent_playbook_status(pid, playbook_status=PlaybookStatus.REJECTED).success, "refused")
    found = run.client.search(query="confirm before deleting data", agent_version=run.agent)
    expect(pid not in [p.agent_playbook_id for p in found.agent_playbooks], "a rejected playbook was served")


# -- generation and aggregation ---------------------------------------------------------------------------------------


@covers("rerun_profile_generation")
def _rerun_profiles(run: Run) -> None:
    reply = run.client.rerun_profile_generation(user_id=run.facts_user, wait_for_response=True)
    expect(reply is not None and reply.success and reply.msg == "Profile generation completed", f"{reply}")


@covers("rerun_playbook_generation")
def _rerun_playbooks(run: Run) -> None:
    reply = run.client.rerun_playbook_generation(agent_version=run.agent, wait_for_response=True)
    expect(reply is not None and reply.success and reply.msg == "Playbook generation completed", f"{reply}")


@covers("manual_profile_generation")
def _manual_profiles(run: Run) -> None:
    # The public method sends in the background and answers None; awaiting what it sends checks the 2xx JSON answer.
    asyncio.run(run.client._manual_profile_generation_async(ManualProfileGenerationRequest(user_id=run.facts_user)))


@covers("manual_playbook_generation")
def _manual_playbooks(run: Run) -> None:
    asyncio.run(run.client._manual_playbook_generation_async(ManualPlaybookGenerationRequest(agent_version=run.agent)))


@covers("upgrade_profiles")
def _upgrade_profiles(run: Run) -> None:
    reply = run.client.upgrade_profiles(user_id=run.facts_user)
    expect(reply.success, f"{reply}")


@covers("upgrade_user_playbooks")
def _upgrade_playbooks(run: Run) -> None:
    reply = run.client.upgrade_user_playbooks(agent_version=run.agent)
    expect(reply.success, f"{reply}")


@covers("run_playbook_aggregation")
def _aggregate(run: Run) -> None:
    reply = run.client.run_playbook_aggregation(agent_version=run.agent, wait_for_response=True)
    expect(reply is not None and reply.success, f"{reply}")
    listed = run.client.get_agent_playbooks(agent_version=run.agent, force_refresh=True).agent_playbooks
    expect(any("us-west-2" in p.content for p in listed), f"the learned rule is gone: {listed}")

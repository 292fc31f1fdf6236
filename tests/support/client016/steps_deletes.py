"""Steps, last part: the deletes, destructive ones last."""

from __future__ import annotations

from harness import PUBLISHER, SESSION, Run, covers, expect

# -- deletes, the destructive ones last -------------------------------------------------------------------------------


@covers("delete_interaction")
def _delete_interaction(run: Run) -> None:
    iid = run.found["interaction_id"]
    expect(run.client.delete_interaction(PUBLISHER, iid, wait_for_response=True).success, "refused")
    expect(iid not in [t.interaction_id for t in run.client.get_interactions(user_id=PUBLISHER).interactions], "kept")


@covers("delete_request")
def _delete_request(run: Run) -> None:
    expect(run.client.delete_request(run.found["deferred_request_id"], wait_for_response=True).success, "refused")
    left = [r.request.request_id for s in run.client.get_requests(user_id=PUBLISHER).sessions for r in s.requests]
    expect(run.found["deferred_request_id"] not in left, f"still listed: {left}")


@covers("delete_session")
def _delete_session(run: Run) -> None:
    expect(run.client.delete_session(SESSION, wait_for_response=True).success, "refused")
    sessions = [s.session_id for s in run.client.get_requests(user_id=PUBLISHER).sessions]
    expect(SESSION not in sessions, f"still listed: {sessions}")


@covers("clear_user_data")
def _clear_user_data(run: Run) -> None:
    cleared = run.client.clear_user_data(PUBLISHER)
    expect(cleared.success and sum(cleared.deleted_counts.values()) >= 1, f"{cleared}")
    expect(run.client.get_interactions(user_id=PUBLISHER).interactions == [], "interactions kept")
    expect(run.client.get_profiles(user_id=PUBLISHER, force_refresh=True).user_profiles == [], "profiles kept")
    kept = run.client.get_agent_playbooks(agent_version=run.agent, force_refresh=True).agent_playbooks
    expect(run.agent_playbook_id in [p.agent_playbook_id for p in kept], "agent playbooks must survive")


@covers("delete_profile")
def _delete_profile(run: Run) -> None:
    profile = run.found["profiles"][0]
    reply = run.client.delete_profile(run.facts_user, profile_id=profile.profile_id, wait_for_response=True)
    expect(reply is not None and reply.success, f"{reply}")
    left = run.client.get_profiles(user_id=run.facts_user, force_refresh=True).user_profiles
    expect(profile.profile_id not in [p.profile_id for p in left], "still listed")


@covers("delete_user_playbook")
def _delete_user_playbook(run: Run) -> None:
    pid = run.found["ann_playbook"].user_playbook_id
    expect(run.client.delete_user_playbook(pid, wait_for_response=True).success, "refused")
    expect(pid not in [p.user_playbook_id for p in run.client.get_user_playbooks(user_id="ann").user_playbooks], "kept")


@covers("delete_agent_playbook")
def _delete_agent_playbook(run: Run) -> None:
    pid = run.found["manual_agent_playbook"]
    expect(run.client.delete_agent_playbook(pid, wait_for_response=True).success, "refused")
    listed = run.client.get_agent_playbooks(agent_version=run.agent, force_refresh=True).agent_playbooks
    expect(pid not in [p.agent_playbook_id for p in listed], "still listed")


@covers("delete_requests_by_ids")
def _delete_requests_by_ids(run: Run) -> None:
    (first, *_) = run.client.get_requests(user_id="bob").sessions[0].requests
    expect(run.client.delete_requests_by_ids([first.request.request_id]).deleted_count == 1, "not deleted")


@covers("delete_profiles_by_ids")
def _delete_profiles_by_ids(run: Run) -> None:
    left = run.client.get_profiles(user_id=run.facts_user, force_refresh=True).user_profiles
    deleted = run.client.delete_profiles_by_ids([p.profile_id for p in left])
    expect(deleted.deleted_count == len(left) >= 1, f"{deleted}")


@covers("delete_user_playbooks_by_ids")
def _delete_user_playbooks_by_ids(run: Run) -> None:
    cat = run.client.get_user_playbooks(user_id="cat").user_playbooks
    expect(run.client.delete_user_playbooks_by_ids([p.user_playbook_id for p in cat]).deleted_count == len(cat), "")


@covers("delete_agent_playbooks_by_ids")
def _delete_agent_playbooks_by_ids(run: Run) -> None:
    expect(run.client.delete_agent_playbooks_by_ids([run.agent_playbook_id]).success, "refused")
    listed = run.client.get_agent_playbooks(agent_version=run.agent, force_refresh=True).agent_playbooks
    expect(run.agent_playbook_id not in [p.agent_playbook_id for p in listed], "still listed")


def _delete_all(run: Run, method: str) -> None:
    expect(getattr(run.client, method)().success, f"{method} refused")


@covers("delete_all_interactions")
def _delete_all_interactions(run: Run) -> None:
    _delete_all(run, "delete_all_interactions")
    expect(run.client.get_all_interactions().interactions == [], "interactions left")


@covers("delete_all_profiles")
def _delete_all_profiles(run: Run) -> None:
    _delete_all(run, "delete_all_profiles")
    expect(run.client.get_all_profiles().user_profiles == [], "profiles left")


@covers("delete_all_user_playbooks")
def _delete_all_user_playbooks(run: Run) -> None:
    _delete_all(run, "delete_all_user_playbooks")
    expect(run.client.get_user_playbooks(user_id="bob").user_playbooks == [], "user playbooks left")


@covers("delete_all_agent_playbooks")
def _delete_all_agent_playbooks(run: Run) -> None:
    _delete_all(run, "delete_all_agent_playbooks")
    expect(run.client.get_agent_playbooks(force_refresh=True).agent_playbooks == [], "agent playbooks left")


@covers("delete_all_playbooks")
def _delete_all_playbooks(run: Run) -> None:
    _delete_all(run, "delete_all_playbooks")
    expect(run.client.search(query=run.query).agent_playbooks == [], "a playbook is still served")

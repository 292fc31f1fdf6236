"""Steps, first part: organisation and config, publishing and the session lifecycle, reads, searches."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

from harness import CORRECTION, PUBLISHER, SESSION, Run, covers, expect, http_refusal, now_s
from reflexio.models.api_schema.domain.enums import PlaybookStatus

# -- organisation and config ------------------------------------------------------------------------------------------


@covers("whoami")
def _whoami(run: Run) -> None:
    me = run.client.whoami()
    expect(me.success and me.org_id == "default", f"whoami: {me}")


@covers("get_my_config")
def _my_config(run: Run) -> None:
    mine = run.client.get_my_config()  # disabled on purpose: storage credentials never leave the service
    expect(mine.success is False and mine.storage_config is None and "disabled" in mine.message, f"{mine}")


@covers("get_config")
def _get_config(run: Run) -> None:
    config = run.client.get_config()
    expect(config.window_size >= config.stride_size > 0, f"window {config.window_size}/{config.stride_size}")
    expect(config.profile_extractor_config is not None, "no profile_extractor_config")
    expect(config.user_playbook_extractor_config is not None, "no user_playbook_extractor_config")
    run.found["config"] = config


@covers("set_config")
def _set_config(run: Run) -> None:
    config = run.found["config"]
    config.window_size, config.stride_size = 12, 6
    saved = run.client.set_config(config)
    expect(saved.get("success") is True, f"set_config: {saved}")
    back = run.client.get_config()
    expect((back.window_size, back.stride_size) == (12, 6), f"read back {back.window_size}/{back.stride_size}")


@covers("update_config")
def _update_config(run: Run) -> None:
    saved = run.client.update_config({"stride_size": 4})
    expect(saved.get("success") is True, f"update_config: {saved}")
    back = run.client.get_config()
    expect((back.window_size, back.stride_size) == (12, 4), f"read back {back.window_size}/{back.stride_size}")
    refused = http_refusal(lambda: run.client.update_config({"no_such_field": 1}))
    expect(refused.status_code == 422 and "no_such_field" in refused.text, f"unknown field: {refused.text}")


@covers("invalidate_cache")
def _invalidate_cache(run: Run) -> None:
    answer = run.client.invalidate_cache()
    expect(answer.get("org_id") == "default" and isinstance(answer.get("invalidated"), bool), f"{answer}")
    other = http_refusal(lambda: run.client.invalidate_cache(org_id="someone-else"))
    expect(other.status_code == 403, f"another org's cache: {other.status_code} {other.text}")


@covers("get_stall_state")
def _stall_state(run: Run) -> None:
    state = run.client.get_stall_state()
    expect(state.stalled is False and state.reason is None, f"{state}")


@covers("mark_stall_notified")
def _stall_notified(run: Run) -> None:
    expect(run.client.mark_stall_notified().notified_in_cc is False, "notified without a stall")


# -- publishing and the session lifecycle -----------------------------------------------------------------------------


@covers("publish_interaction")
def _publish(run: Run) -> None:
    reply = run.client.publish_interaction(
        PUBLISHER, CORRECTION, agent_version=run.agent, session_id=SESSION, wait_for_response=True
    )
    expect(reply.success and reply.request_id and reply.playbooks_added == 1, f"{reply}")
    expect(reply.learning_status is None, f"a waited publish is not deferred: {reply}")
    run.found["request_id"] = reply.request_id


@covers("publish_interaction_async")
def _publish_async(run: Run) -> None:
    reply = asyncio.run(
        run.client.publish_interaction_async(
            PUBLISHER,
            [{"role": "user", "content": "Thanks, that worked."}],
            agent_version=run.agent,
            session_id="c016-s2",
        )
    )
    expect(reply.success and reply.request_id and reply.learning_status == "deferred", f"{reply}")
    run.found["deferred_request_id"] = reply.request_id


@covers("get_learning_status")
def _learning_status(run: Run) -> None:
    expect(run.client.get_learning_status(run.found["request_id"]) == "done", "a waited publish is not done")
    deferred = run.client.get_learning_status(run.found["deferred_request_id"])
    expect(deferred in ("pending", "processing"), f"a deferred publish no run learned yet: {deferred}")
    unknown = http_refusal(lambda: run.client.get_learning_status("no-such-request"))
    expect(unknown.status_code == 404, f"unknown request: {unknown.status_code}")


@covers("get_requests")
def _get_requests(run: Run) -> None:
    sessions = run.client.get_requests(user_id=PUBLISHER).sessions
    expect(SESSION in [s.session_id for s in sessions], f"sessions {[s.session_id for s in sessions]}")
    # Published by this project's SDK without a session id: a stable generated one, the same on every read.
    first = [s.session_id for s in run.client.get_requests(user_id="ann").sessions]
    again = [s.session_id for s in run.client.get_requests(user_id="ann").sessions]
    expect(first and all(first) and first == again, f"sessions of ann {first} then {again}")


@covers("mark_session_outcome")
def _mark_outcome(run: Run) -> None:
    at = now_s()  # the retry is the same report: another second would be another report (a conflict)
    first = run.client.mark_session_outcome(session_id=SESSION, outcome="success", occurred_at=at)
    expect(first.success and first.recorded and first.user_id == PUBLISHER, f"{first}")
    retry = run.client.mark_session_outcome(session_id=SESSION, outcome="success", occurred_at=at)
    expect(retry.success and not retry.recorded, f"the first outcome is immutable: {retry}")


@covers("get_session_outcomes")
def _get_outcomes(run: Run) -> None:
    outcomes = run.client.get_session_outcomes(session_ids=[SESSION]).session_outcomes
    expect(
        [(o.session_id, o.outcome.value, o.user_id) for o in outcomes] == [(SESSION, "success", PUBLISHER)],
        f"{outcomes}",
    )


# -- reads ------------------------------------------------------------------------------------------------------------


@covers("get_interactions")
def _get_interactions(run: Run) -> None:
    turns = run.client.get_interactions(user_id=PUBLISHER).interactions
    contents = [t.content for t in turns]
    expect(all(t["content"] in contents for t in CORRECTION), f"{contents}")
    # a turn of the waited publish (delete_interaction removes it; delete_request removes the deferred one)
    run.found["interaction_id"] = next(t.interaction_id for t in turns if t.request_id == run.found["request_id"])


@covers("get_all_interactions")
def _get_all_interactions(run: Run) -> None:
    users = {t.user_id for t in run.client.get_all_interactions(limit=100).interactions}
    expect({"ann", PUBLISHER} <= users, f"users {users}")


@covers("get_profiles")
def _get_profiles(run: Run) -> None:
    profiles = run.client.get_profiles(user_id=run.facts_user, force_refresh=True).user_profiles
    expect(profiles and {p.user_id for p in profiles} == {run.facts_user}, f"{profiles}")
    run.found["profiles"] = profiles


@covers("get_all_profiles")
def _get_all_profiles(run: Run) -> None:
    ids = {p.profile_id for p in run.client.get_all_profiles(limit=100).user_profiles}
    expect({p.profile_id for p in run.found["profiles"]} <= ids, "the facts user's profiles are not listed")


@covers("get_profile_change_log")
def _profile_change_log(run: Run) -> None:
    logs = run.client.get_profile_change_log().profile_change_logs
    expect(any(log.user_id == run.facts_user and log.added_profiles for log in logs), "no change of the facts user")


@covers("storage_stats")
def _storage_stats(run: Run) -> None:
    stats = run.client.storage_stats(run.facts_user)
    expect(stats.success and stats.profile_count == len(run.found["profiles"]), f"{stats}")
    expect(stats.oldest_profile_modified is not None and stats.newest_profile_modified is not None, f"{stats}")
    ann = run.client.storage_stats("ann")
    expect(ann.playbook_count >= 1 and ann.profile_count == 0, f"ann: {ann}")


@covers("get_user_playbooks")
def _get_user_playbooks(run: Run) -> None:
    playbooks = run.client.get_user_playbooks(user_id="ann").user_playbooks
    expect(playbooks and {p.user_id for p in playbooks} == {"ann"}, f"{playbooks}")
    expect(any("us-west-2" in p.content for p in playbooks), f"{[p.content for p in playbooks]}")
    run.found["ann_playbook"] = playbooks[0]


@covers("get_agent_playbooks")
def _get_agent_playbooks(run: Run) -> None:
    listed = run.client.get_agent_playbooks(agent_version=run.agent, force_refresh=True).agent_playbooks
    expect([p.agent_playbook_id for p in listed] == [run.agent_playbook_id], f"{listed}")


@covers("review_user_playbooks")
def _review(run: Run) -> None:
    report = run.client.review_user_playbooks(
        start_time=datetime.now(UTC) - timedelta(days=1), end_time=datetime.now(UTC), top_k=10, report_only=True
    )
    expect(report.success and report.report_only and report.selected_count == len(report.results) >= 1, f"{report}")
    expect(
        report.accepted_count + report.edited_count + report.rejected_count + report.skipped_count
        == report.selected_count,
        f"counts do not add up: {report}",
    )


# -- searches ---------------------------------------------------------------------------------------------------------


@covers("search")
def _search(run: Run) -> None:
    # Searches serve agent playbooks once approved (pending ones wait in the approval queue).
    approved = run.client.update_agent_playbook_status(run.agent_playbook_id, playbook_status=PlaybookStatus.APPROVED)
    expect(approved.success, f"approval refused: {approved}")
    found = run.client.search(query=run.query, user_id="ann", agent_version=run.agent)
    expect([p.user_id for p in found.user_playbooks] == ["ann"], f"user playbooks {found.user_playbooks}")
    expect([p.agent_playbook_id for p in found.agent_playbooks] == [run.agent_playbook_id], f"{found}")
    only = run.client.search(query=run.query, user_id="ann", agent_version=run.agent, entity_types=["agent_playbooks"])
    expect(not only.user_playbooks and not only.profiles and only.agent_playbooks, f"entity_types ignored: {only}")


@covers("search_async")
def _search_async(run: Run) -> None:
    found = asyncio.run(run.client.search_async(query=run.query, user_id="bob", agent_version=run.agent))
    expect([p.user_id for p in found.user_playbooks] == ["bob"], f"{found}")


@covers("search_profiles")
def _search_profiles(run: Run) -> None:
    found = run.client.search_profiles(user_id=run.facts_user, query="timezone")
    expect(any("CET" in p.content for p in found.user_profiles), f"{[p.content for p in found.user_profiles]}")


@covers("search_user_profiles")
def _search_user_profiles(run: Run) -> None:
    found = run.client.search_user_profiles(user_id=run.facts_user, query="SQL examples")
    expect(any("SQL" in p.content for p in found.user_profiles), f"{[p.content for p in found.user_profiles]}")


@covers("rerank_user_profiles")
def _rerank(run: Run) -> None:
    ids = [p.profile_id for p in run.found["profiles"]]
    ranked = run.client.rerank_user_profiles(user_id=run.facts_user, query="timezone", profile_ids=ids, top_k=1)
    expect(len(ranked.user_profiles) == 1 and "CET" in ranked.user_profiles[0].content, f"{ranked}")
    foreign = run.client.rerank_user_profiles(user_id="ann", query="timezone", profile_ids=ids)
    expect(foreign.user_profiles == [], "another user's profile ids must be dropped")


@covers("search_user_playbooks")
def _search_user_playbooks(run: Run) -> None:
    found = run.client.search_user_playbooks(query=run.query, user_id="ann", agent_version=run.agent)
    expect([p.user_id for p in found.user_playbooks] == ["ann"], f"{found}")


@covers("search_agent_playbooks")
def _search_agent_playbooks(run: Run) -> None:
    found = run.client.search_agent_playbooks(query=run.query, agent_version=run.agent)
    expect([p.agent_playbook_id for p in found.agent_playbooks] == [run.agent_playbook_id], f"{found}")


@covers("search_interactions")
def _search_interactions(run: Run) -> None:
    found = run.client.search_interactions(user_id="ann", query="us-west-2")
    expect(any("us-west-2" in t.content for t in found.interactions), f"{found}")

"""The real reflexio-client 0.2.16 against a live service: `drive(service)` runs `drive.py` (every public method of
the client, each answer checked) in the client's own Python 3.12 venv and returns one report row per method.

Used by tests/test_reflexio_client_016.py and by `python -m tests.support.client016.report` (the progress table).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.support.learned import AGENT, QUERY, LearnedService
from tests.support.py312 import venv_python

HERE = Path(__file__).resolve().parent
REQUIREMENTS = HERE / "requirements.txt"
DRIVER = HERE / "drive.py"
DRIVE_TIMEOUT_S = 1800

#: Every public method of reflexio-client 0.2.16's ReflexioClient (the driver reports any it does not call).
CLIENT_METHODS = (
    "add_agent_playbooks add_user_playbook add_user_profile cancel_evaluation_regeneration cancel_pending_tool_call "
    "clear_user_data delete_agent_playbook delete_agent_playbooks_by_ids delete_all_agent_playbooks "
    "delete_all_interactions delete_all_playbooks delete_all_profiles delete_all_user_playbooks delete_interaction "
    "delete_profile delete_profiles_by_ids delete_request delete_requests_by_ids delete_session delete_user_playbook "
    "delete_user_playbooks_by_ids get_agent_playbooks get_agent_success_evaluation_results get_all_interactions "
    "get_all_profiles get_config get_evaluation_regeneration_status get_interactions get_learning_status "
    "get_my_config get_pending_tool_call get_profile_change_log get_profiles get_requests "
    "get_retrieval_experiment_results get_retrieved_learning_evaluation_results get_session_outcomes "
    "get_stall_state get_user_playbooks grade_on_demand invalidate_cache list_pending_tool_calls "
    "list_retrieval_experiments manual_playbook_generation manual_profile_generation "
    "mark_pending_tool_call_not_applicable mark_session_outcome mark_stall_notified publish_interaction "
    "publish_interaction_async regenerate_evaluations rerank_user_profiles rerun_playbook_generation "
    "rerun_profile_generation resolve_pending_tool_call review_user_playbooks run_playbook_aggregation search "
    "search_agent_playbooks search_async search_interactions search_profiles search_user_playbooks "
    "search_user_profiles set_config start_retrieval_experiment stop_retrieval_experiment storage_stats "
    "update_agent_playbook update_agent_playbook_status update_config update_pending_tool_call_answer "
    "update_user_playbook upgrade_profiles upgrade_user_playbooks whoami"
).split()


def drive(service: LearnedService) -> list[dict]:
    """Run the driver against `service` (a fresh `serve_learned` lake: the driver ends by deleting everything);
    one row {"method", "status", "detail"} per client method, in call order."""
    python = venv_python(REQUIREMENTS)
    seed = {
        "url": service.url,
        "agent": AGENT,
        "agent_playbook_id": service.agent_playbook_id,
        "facts_user": service.facts_user,
        "query": QUERY,
    }
    done = subprocess.run(
        [str(python), str(DRIVER), json.dumps(seed)], capture_output=True, text=True, timeout=DRIVE_TIMEOUT_S
    )
    if done.returncode != 0:
        raise RuntimeError(f"drive.py exited {done.returncode}:\n{done.stderr[-4000:]}")
    sys.stderr.write(done.stderr[-4000:])  # the client's own warnings, for the test log
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

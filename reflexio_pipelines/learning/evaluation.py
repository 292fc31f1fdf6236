"""Judging closed sessions: each evaluator's deterministic sample of them (`sessions.is_sampled`), judged once, as
`session_evaluations` rows, and the head-to-head `shadow_comparisons` rows of their turns carrying `shadow_content`.

Pure apart from the judge (which may call an LLM). assets/evaluation.py wires it to the run's resources;
lake/evaluations.py reads and writes the tables.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from reflexio_pipelines.learning.config import AgentSuccessConfig
from reflexio_pipelines.learning.impact import day_of
from reflexio_pipelines.learning.judge import Judge, session_verdict_from_pairs
from reflexio_pipelines.learning.llm_judge import JudgeFailed
from reflexio_pipelines.learning.llm_ledger import about_user
from reflexio_pipelines.learning.sessions import Session, corrections_in, is_sampled, user_turns_to_resolution
from reflexio_pipelines.learning.types import stable_uuid


@dataclass
class Judged:
    """What one evaluation run judged: `session_evaluations` rows, `shadow_comparisons` rows, and its counts (closed
    sessions, skipped ones, failed judgements, the judge's calls and tokens)."""

    results: list[dict]
    pairs: list[dict]
    stats: defaultdict[str, int]


def judge_sessions(
    judge: Judge,
    sessions: Sequence[Session],
    evaluators: Sequence[AgentSuccessConfig],
    done: set[str],
    now: int,
    forced: frozenset[str] = frozenset(),
) -> Judged:
    """Judge the closed `sessions` each evaluator samples and has not judged yet (`done`: the result ids already
    written), at `now` (unix s). A session whose judging fails gets no row: the next run judges it again. Sessions
    named in `forced` (grading asked for by a caller) are judged whether or not the sampler picked them; a session
    already judged keeps its one row (the result id is per evaluator and session)."""
    results, pairs, stats = [], [], defaultdict(int)
    stats["sessions_closed"] = len(sessions)
    for evaluator in evaluators:
        for session in sessions:
            result_id = stable_uuid(evaluator.evaluation_name, session.session_id)
            sampled = session.session_id in forced or is_sampled(
                session.session_id, evaluator.evaluation_name, evaluator.sampling_rate
            )
            if result_id in done or not sampled:
                stats["already_evaluated" if result_id in done else "not_sampled"] += 1
                continue
            try:
                with about_user(session.user_id):  # a session's judge calls go when its user is erased
                    row, shadow_rows = evaluation_rows(judge, session, evaluator, result_id, now, stats)
            except JudgeFailed:  # nothing written: the session is judged again by the next run
                stats["judge_failed"] += 1
                continue
            results.append(row)
            pairs.extend(shadow_rows)
    return Judged(results, pairs, stats)


def evaluation_rows(
    judge: Judge,
    session: Session,
    evaluator: AgentSuccessConfig,
    result_id: str,
    now: int,
    stats: defaultdict[str, int],
) -> tuple[dict, list[dict]]:
    """One session's `session_evaluations` row by `evaluator`, and the `shadow_comparisons` rows of its turns
    carrying `shadow_content`; the judge's calls and tokens are added to `stats`."""
    verdict, calls, prompt_tokens, completion_tokens = judge.evaluate(session, evaluator.success_definition_prompt)
    stats["llm_calls"] += calls
    stats["prompt_tokens"] += prompt_tokens
    stats["completion_tokens"] += completion_tokens
    day = day_of(session.last_at)
    shadow_rows, verdicts = [], []
    for turn in session.turns:
        if not turn.shadow_content:
            continue
        pair, calls, prompt_tokens, completion_tokens = judge.compare(session, turn)
        stats["llm_calls"] += calls
        stats["prompt_tokens"] += prompt_tokens
        stats["completion_tokens"] += completion_tokens
        verdicts.append(pair)
        shadow_rows.append(
            {
                "session_id": session.session_id,
                "turn_id": turn.turn_id,
                "agent_version": session.agent_version,
                "presented_first": pair.presented_first,
                "regular_vs_shadow": pair.regular_vs_shadow,
                "judge": getattr(judge, "name", "heuristic"),
                "model": getattr(judge, "model", "builtin"),
                "day": day,
                "evaluation_name": evaluator.evaluation_name,
            }
        )
    row = {
        "result_id": result_id,
        "session_id": session.session_id,
        "user_id": session.user_id,
        "agent_version": session.agent_version,
        "evaluation_name": evaluator.evaluation_name,
        "is_success": verdict.is_success,
        "failure_type": None if verdict.is_success else verdict.failure_type,
        "failure_reason": None if verdict.is_success else verdict.failure_reason,
        "is_escalated": verdict.is_escalated,
        "regular_vs_shadow": session_verdict_from_pairs(verdicts),
        "shadow_pairs": len(verdicts),
        "number_of_correction_per_session": corrections_in(session),
        "user_turns_to_resolution": user_turns_to_resolution(session) if verdict.is_success else None,
        "judge": getattr(judge, "name", "heuristic"),
        "model": getattr(judge, "model", "builtin"),
        "prompt_version": getattr(judge, "prompt_version", "heuristic-v1"),
        "session_started_at": session.started_at,
        "session_closed_at": session.last_at,
        "created_at": now,
        "day": day,
    }
    return row, shadow_rows

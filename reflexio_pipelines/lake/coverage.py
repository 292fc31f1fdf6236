"""Learning coverage of one published request (the original's `GET /api/learning_status`): whether a run has
learned from its turns yet, and if not, what it is waiting for.

A request's turns land in one ingest window. They are covered once every extractor group that reads them has them
in its `extraction_bookmarks.processed_turn_ids` for that window — the same test a learning run uses to pick the
users it has work for (`learning.learn.users_with_new_turns`), so "covered" means exactly "no run would learn them
again". Before that the request is `pending` (no run has taken the turns in, or the run held them back for a full
batch or a quiet session), `processing` (a run compacted them and has not committed its learning yet), or `failed`
(the user's batch failed in as many runs as are retried automatically).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Literal

from reflexio_pipelines.lake.interactions import turn_rows
from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.records import turns_from_table
from reflexio_pipelines.lake.windows import Granularity, key_of_moment, window_of_key
from reflexio_pipelines.learning.extractor_groups import ExtractorGroup
from reflexio_pipelines.learning.learn import users_with_new_turns
from reflexio_pipelines.pending import MAX_AUTOMATIC_RETRIES

Status = Literal["pending", "processing", "done", "failed"]


@dataclass(frozen=True)
class Coverage:
    """A request's learning status and why (the original's LearningStatusResponse), plus where its turns are."""

    status: Status
    reason: str
    user_id: str
    window: str


def request_coverage(
    lake: Lake, request_id: str, groups: list[ExtractorGroup], granularity: Granularity
) -> Coverage | None:
    """The coverage of `request_id`'s turns, or None when no live turn has that request id."""
    landed = turn_rows(lake, [("request_id", "=", request_id)])
    if not landed:
        return None
    user_id = landed[0]["user_id"]
    moment = datetime.fromtimestamp(landed[0]["ingested_at_us"] / 1_000_000, tz=timezone.utc)
    window = window_of_key(key_of_moment(moment, granularity), granularity)
    compacted = lake.read_table("turns", window, filters=[("request_id", "=", request_id)])

    def answer(status: Status, reason: str) -> Coverage:
        return Coverage(status, reason, user_id, window)

    if compacted.num_rows == 0:
        return answer("pending", f"waiting for a learning run of window {window}")
    bookmarks = lake.read_table("extraction_bookmarks", window, filters=[("user_id", "=", user_id)]).to_pylist()
    if not users_with_new_turns(turns_from_table(compacted), bookmarks, groups):
        runs = sorted({b["run_id"] for b in bookmarks if b["run_id"]})
        return answer("done", f"learned by run {runs[-1]}" if runs else "no extractor reads these turns")
    failures = [
        row
        for row in lake.read_table("extraction_failures", window, filters=[("user_id", "=", user_id)]).to_pylist()
        if row["resolved_by_run"] is None
    ]
    if failures:
        cause = f"{failures[-1]['error_class']}: {failures[-1]['error_message']}"
        if len({row["run_id"] for row in failures}) >= MAX_AUTOMATIC_RETRIES:
            return answer("failed", f"learning failed in every automatic retry ({cause}); re-run the window")
        return answer("pending", f"learning failed ({cause}); a later run retries it")
    if not lake.consumed_state(window).learned:
        return answer("processing", f"a run of window {window} took the turns in and has not committed yet")
    held = [b for b in bookmarks if b["held_turns"]]
    if held:
        due = min((b["due_at_us"] for b in held if b["due_at_us"] is not None), default=None)
        when = (
            f" (due by {datetime.fromtimestamp(due / 1_000_000, tz=timezone.utc):%Y-%m-%dT%H:%M:%SZ})"
            if due
            else " (until the window closes)"
        )
        return answer("pending", f"held back for a full batch or a quiet session{when}; finalize_session learns it now")
    return answer("pending", f"waiting for a learning run of window {window}")

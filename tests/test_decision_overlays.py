"""The service's overlays of human decisions (approvals, curation, outcome reviews): a refresh racing a decision
never undoes it."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable

import pyarrow as pa

import serving.control as control_module
import serving.curation as curation_module
import serving.outcomes as outcomes_module
from reflexio_pipelines.lake.control import record_decision
from reflexio_pipelines.lake.curation import CurationOp
from reflexio_pipelines.lake.outcomes import record_review
from reflexio_pipelines.lake.schemas import TABLES
from serving.control import ControlOverlay
from serving.curation import CurationOverlay
from serving.outcomes import LearningPolicy, OutcomeOverlay


def race(monkeypatch, module, reader: str, refresh: Callable[[], None], decide: Callable[[], None]) -> None:
    """Run `refresh` so that it has read the log (through `module.reader`) before `decide` starts, and finishes
    only after `decide` had its chance to complete."""
    original, read, go = getattr(module, reader), threading.Event(), threading.Event()

    def slow(*args, **kwargs):
        found = original(*args, **kwargs)  # the log as it stands before the decision
        read.set()
        go.wait(5)
        return found

    monkeypatch.setattr(module, reader, slow)
    refresher = threading.Thread(target=refresh)
    refresher.start()
    assert read.wait(5)
    decider = threading.Thread(target=decide)
    decider.start()
    decider.join(1.0)  # left unserialised, the decision lands here, before the stale refresh finishes
    go.set()
    refresher.join(5)
    decider.join(5)
    monkeypatch.setattr(module, reader, original)


def test_an_approval_is_not_undone_by_a_refresh_that_read_the_log_before_it(lake, monkeypatch):
    record_decision(lake, "agent_playbook", "7", "pending")
    overlay = ControlOverlay(lake)
    race(monkeypatch, control_module, "decisions", overlay.refresh, lambda: overlay.decide("7", "approved"))
    assert overlay.status("7", None) == "approved"
    overlay.refresh()
    assert overlay.status("7", None) == "approved"  # and the log agrees


def test_a_deletion_is_not_undone_by_a_refresh_that_read_the_log_before_it(lake, monkeypatch):
    overlay = CurationOverlay(lake)
    overlay.record([CurationOp("profile", "p1", "update", user_id="u", fields={"content": "x"})])
    delete = CurationOp("profile", "p2", "delete", user_id="u")
    race(monkeypatch, curation_module, "read_ops", overlay.refresh, lambda: overlay.record([delete]))
    assert "p2" in overlay.excluded("profile")
    overlay.refresh()
    assert "p2" in overlay.excluded("profile")


def test_a_reviewers_keep_is_not_undone_by_a_refresh_that_read_the_log_before_it(lake, monkeypatch):
    flagged = {"entity": "user_playbook", "item_id": "9", "user_id": "u", "agent_version": "v", "served": 5}
    flagged |= {"sessions": 5, "helpful": 0, "harmful": 4, "missed": 0, "flagged": True, "held_out": False}
    flagged |= {"computed_at": int(time.time()) - 5, "rules": None}
    lake.append("item_outcomes", pa.Table.from_pylist([flagged], schema=TABLES["item_outcomes"]))
    policy = LearningPolicy(lake, json.dumps({"outcomes": {"min_outcomes": 3, "hold_out_flagged": True}}))
    overlay = OutcomeOverlay(lake, policy)
    overlay.refresh()
    assert overlay.excluded("user_playbook") == {"9"}  # flagged and held out, until a reviewer keeps it
    record_review(lake, "profile", "elsewhere", "another replica")  # the log moved: the next refresh reads it
    race(monkeypatch, outcomes_module, "log_state", overlay.refresh, lambda: overlay.keep("user_playbook", "9"))
    assert overlay.excluded("user_playbook") == frozenset()
    overlay.refresh()
    assert overlay.excluded("user_playbook") == frozenset()

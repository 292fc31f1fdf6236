"""The service's overlay of approval decisions: a refresh racing a decision never undoes it."""

from __future__ import annotations

import threading

import serving.control as control_module
from reflexio_pipelines.lake.control import decisions, record_decision
from serving.control import ControlOverlay


def test_a_refresh_that_read_the_log_before_a_decision_does_not_undo_it(lake, monkeypatch):
    record_decision(lake, "agent_playbook", "7", "pending")
    overlay = ControlOverlay(lake)
    read, go = threading.Event(), threading.Event()

    def slow_decisions(lake_, entity="agent_playbook"):
        statuses = decisions(lake_, entity)  # the log as it stands before the approval below
        read.set()
        go.wait(5)
        return statuses

    monkeypatch.setattr(control_module, "decisions", slow_decisions)
    refresher = threading.Thread(target=overlay.refresh)
    refresher.start()
    assert read.wait(5)
    decider = threading.Thread(target=overlay.decide, args=("7", "approved"))
    decider.start()
    decider.join(1.0)  # left unserialised, the decision lands here, before the stale refresh finishes
    go.set()
    refresher.join(5)
    decider.join(5)
    assert overlay.status("7", None) == "approved"
    monkeypatch.setattr(control_module, "decisions", decisions)
    overlay.refresh()
    assert overlay.status("7", None) == "approved"  # and the log agrees

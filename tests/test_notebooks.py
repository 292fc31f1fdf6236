"""Analyst notebooks run top to bottom against a freshly materialised lake."""

from __future__ import annotations

from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from reflexio_pipelines.runs import launch

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


@pytest.mark.parametrize("name", ["quickstart.ipynb"])
def test_notebook_executes_and_shows_learned_items(name, settings, instance, landed, monkeypatch):
    launch(settings=settings, instance=instance)
    monkeypatch.setenv("REFLEXIO_LAKE", settings.lake)
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    NotebookClient(notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}).execute()
    outputs = "\n".join(
        str(out.get("text", "")) + str(out.get("data", {}).get("text/plain", ""))
        for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs
    )
    assert "us-west-2" in outputs  # the correction, traced back to its turns
    assert "Error" not in outputs

"""Analyst notebooks: stored without outputs, and executed top to bottom against freshly materialised lakes.

Every notebook in notebooks/ must be stripped (no outputs, no execution counts) and must have an execution test
below that checks what it prints against the lake it ran on.

Strip the notebooks before committing:  .venv/bin/python tests/test_notebooks.py   (or pass notebook paths)
"""

from __future__ import annotations

import base64
import importlib.util
import re
import sys
import time
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import nbformat
import pytest

from tests.support.dagster_home import dagster_home_env

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
ALL_NOTEBOOKS = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))
EXECUTED = {"quickstart.ipynb", "lake_analytics.ipynb", "evaluation.ipynb"}  # each has an execution test below
#: Cell metadata that only records a run (nbclient timings, UI state): removed by `strip`, rejected by the test.
RUN_METADATA = ("execution", "collapsed", "scrolled", "ExecuteTime")


# -- stripping ------------------------------------------------------------------------------------------------


def unstripped(notebook) -> list[str]:
    """What in a notebook is left over from running it (empty = stripped)."""
    problems = []
    for i, cell in enumerate(notebook.cells):
        if cell.cell_type != "code":
            continue
        if cell.get("outputs"):
            problems.append(f"cell {i}: {len(cell.outputs)} output(s)")
        if cell.get("execution_count") is not None:
            problems.append(f"cell {i}: execution_count {cell.execution_count}")
        problems.extend(f"cell {i}: metadata.{key}" for key in RUN_METADATA if key in cell.metadata)
    if "widgets" in notebook.metadata:
        problems.append("notebook metadata.widgets")
    return problems


def strip(path: Path) -> bool:
    """Remove outputs, execution counts and run metadata from a notebook file; returns whether it changed."""
    notebook = nbformat.read(path, as_version=4)
    if not unstripped(notebook):
        return False
    for cell in notebook.cells:
        if cell.cell_type == "code":
            cell.outputs = []
            cell.execution_count = None
            for key in RUN_METADATA:
                cell.metadata.pop(key, None)
    notebook.metadata.pop("widgets", None)
    nbformat.write(notebook, path)
    return True


def test_every_notebook_has_an_execution_test():
    assert ALL_NOTEBOOKS, f"no notebooks found in {NOTEBOOKS}"
    assert set(ALL_NOTEBOOKS) == EXECUTED, "add an execution test for each new notebook (and list it in EXECUTED)"


@pytest.mark.parametrize("name", ALL_NOTEBOOKS)
def test_notebook_is_stored_stripped(name):
    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    nbformat.validate(notebook)
    problems = unstripped(notebook)
    assert not problems, (
        f"{name} is stored with outputs ({'; '.join(problems[:5])}); strip it with "
        f"`.venv/bin/python tests/test_notebooks.py notebooks/{name}`"
    )


def test_strip_removes_outputs(tmp_path):
    """The helper the failure message points at really produces a notebook the check above accepts."""
    notebook = nbformat.v4.new_notebook(
        cells=[nbformat.v4.new_markdown_cell("# t"), nbformat.v4.new_code_cell("1 + 1")]
    )
    notebook.cells[1].outputs = [nbformat.v4.new_output("execute_result", data={"text/plain": "2"}, execution_count=1)]
    notebook.cells[1].execution_count = 1
    notebook.cells[1].metadata["execution"] = {"iopub.execute_input": "2026-11-30T00:00:00Z"}
    path = tmp_path / "dirty.ipynb"
    nbformat.write(notebook, path)
    assert unstripped(nbformat.read(path, as_version=4))
    assert strip(path) and not strip(path)
    cleaned = nbformat.read(path, as_version=4)
    assert not unstripped(cleaned) and cleaned.cells[1].source == "1 + 1"


# -- execution ------------------------------------------------------------------------------------------------


def execute(name: str) -> tuple[nbformat.NotebookNode, float]:
    """Run a copy of a notebook in a fresh python3 kernel (cwd notebooks/, the test's environment); the stored
    file is not modified. Raises CellExecutionError on the first failing cell."""
    from nbclient import NotebookClient

    notebook = nbformat.read(NOTEBOOKS / name, as_version=4)
    started = time.monotonic()
    NotebookClient(
        notebook, timeout=180, kernel_name="python3", resources={"metadata": {"path": str(NOTEBOOKS)}}
    ).execute()
    return notebook, time.monotonic() - started


def text_of(notebook) -> str:
    """Everything the notebook printed or displayed as text (stdout, stderr, text/plain results)."""
    parts = []
    for cell in notebook.cells:
        for out in cell.get("outputs", []):
            parts.append(str(out.get("text", "")))
            parts.append(str(out.get("data", {}).get("text/plain", "")))
            parts.append(str(out.get("evalue", "")))
    return "\n".join(parts)


def png_images(notebook) -> list[bytes]:
    return [
        base64.b64decode(out["data"]["image/png"])
        for cell in notebook.cells
        for out in cell.get("outputs", [])
        if "image/png" in out.get("data", {})
    ]


def assert_clean(notebook, name: str) -> None:
    text = text_of(notebook)
    for bad in ("Traceback", "Error", "Warning"):
        assert bad not in text, f"{name} printed {bad!r}:\n{text[max(0, text.find(bad) - 500) : text.find(bad) + 500]}"


def report(capsys, name: str, seconds: float, lake: str) -> None:
    with capsys.disabled():
        print(f"\n{name}: executed in {seconds:.1f} s against {lake}")


def _load_sample_lake_module():
    spec = importlib.util.spec_from_file_location("sample_lake", NOTEBOOKS / "sample_lake.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def sample_lake(tmp_path_factory):
    """The synthetic sample lake (notebooks/sample_lake.py), materialised once for the read-only notebooks:
    six days, two agent versions, aggregation, an approval, a logged retrieval and an evaluation run."""
    import dagster as dg

    root = tmp_path_factory.mktemp("sample")
    with dagster_home_env(root / "dagster_home"):
        with dg.DagsterInstance.ephemeral() as instance:
            summary = _load_sample_lake_module().build_sample_lake(
                root / "lake", instance=instance, log=lambda *_: None
            )
    assert summary["windows"] == 6 and summary["evaluation"]["success"]
    return Path(summary["lake"])


def _lake_rows(lake: Path, table: str) -> list[dict]:
    from reflexio_pipelines.lake.io import Lake

    return Lake.at(lake).read_table(table).to_pylist()


@pytest.mark.parametrize("lake_from", ["REFLEXIO_LAKE", "temporary"])
def test_quickstart_publishes_materialises_and_finds_the_correction(lake_from, settings, instance, monkeypatch, capsys):
    lake = Path(settings.lake)
    if lake_from == "REFLEXIO_LAKE":
        monkeypatch.setenv("REFLEXIO_LAKE", str(lake))  # an empty lake: the notebook itself fills it
    else:
        monkeypatch.delenv("REFLEXIO_LAKE", raising=False)
    notebook, seconds = execute("quickstart.ipynb")
    assert_clean(notebook, "quickstart")
    text = text_of(notebook)
    search = text[text.index("user playbook [correction]") :]
    assert re.search(r"content : .*us-west-2", search), "the learned correction is returned by /api/search"
    assert re.search(r"from turns: \['[^']+:0'", search), "with the turns it was learned from"
    # the provenance table shows the user's own words, joined back from the turns table
    assert "No — we never deploy to us-east-1, always use us-west-2." in text
    assert "windows materialised: ['" in text and "all succeeded: True" in text
    if lake_from == "REFLEXIO_LAKE":  # it really wrote to (and learned in) the lake it was pointed at
        learned = [r["content"] for r in _lake_rows(lake, "user_playbooks") if r["user_id"] == "alice"]
        assert any("us-west-2" in c for c in learned)
        assert (lake / "indexes" / "search" / "CURRENT").exists()
    else:
        assert not lake.exists(), "without REFLEXIO_LAKE the notebook must not touch any configured lake"
        assert re.search(r"lake: .*reflexio-quickstart-", text)
    report(
        capsys,
        f"quickstart.ipynb ({lake_from})",
        seconds,
        "its own temporary lake" if lake_from != "REFLEXIO_LAKE" else str(lake),
    )


@pytest.mark.e2e
@pytest.mark.parametrize("lake_from", ["REFLEXIO_LAKE", "temporary"])
def test_lake_analytics_reports_traffic_corrections_and_clusters(lake_from, request, monkeypatch, capsys):
    if lake_from == "REFLEXIO_LAKE":
        lake = request.getfixturevalue("sample_lake")
        monkeypatch.setenv("REFLEXIO_LAKE", str(lake))
    else:  # no lake configured: the notebook builds the same sample lake itself, in a temporary directory
        monkeypatch.delenv("REFLEXIO_LAKE", raising=False)
    notebook, seconds = execute("lake_analytics.ipynb")
    assert_clean(notebook, "lake_analytics")
    text = text_of(notebook)
    assert "DuckDB and Polars agree: True" in text
    printed = {day: int(n) for day, n in re.findall(r"turns per day  (\d{4}-\d{2}-\d{2})\s+(\d+)", text)}
    assert len(printed) >= 7 and all(n > 0 for n in printed.values())  # six sample days + today (+1 across midnight)
    images = png_images(notebook)
    assert len(images) >= 4 and all(img.startswith(b"\x89PNG") for img in images)
    assert "cluster sizes (current agent playbooks):" in text
    if lake_from == "temporary":
        assert re.search(r"lake: .*reflexio-sample-", text)
        report(capsys, "lake_analytics.ipynb (temporary)", seconds, "the sample lake it built itself")
        return
    expected = Counter(
        datetime.fromtimestamp(r["created_at"], timezone.utc).strftime("%Y-%m-%d") for r in _lake_rows(lake, "turns")
    )
    assert printed == dict(expected)
    # the cluster-size table: one row per current agent playbook, with its member count
    table = text[text.index("cluster sizes (current agent playbooks):") :]
    playbooks = [r for r in _lake_rows(lake, "agent_playbooks") if r["status"] == "current"]
    assert playbooks and f"shape: ({len(playbooks)}, 5)" in table
    biggest = max(playbooks, key=lambda r: len(r["member_ids"]))
    assert re.search(rf"{re.escape(biggest['content'][:40])}.*┆ {len(biggest['member_ids'])}\s", table)
    assert "approved" in text  # the sample's reviewer decision shows as the effective approval status
    report(capsys, "lake_analytics.ipynb (REFLEXIO_LAKE)", seconds, "the sample lake")


@pytest.mark.e2e
def test_evaluation_reports_success_rates_shadow_outcomes_and_before_after(sample_lake, monkeypatch, capsys):
    monkeypatch.setenv("REFLEXIO_LAKE", str(sample_lake))
    notebook, seconds = execute("evaluation.ipynb")
    assert_clean(notebook, "evaluation")
    text = text_of(notebook)
    evaluations = _lake_rows(sample_lake, "session_evaluations")
    for version in ("ops-agent-1.2", "ops-agent-1.3"):
        rows = [r for r in evaluations if r["agent_version"] == version]
        ok = sum(r["is_success"] for r in rows)
        match = re.search(rf"success rate  {re.escape(version)}\s+(\d+)/(\d+)\s+=\s+([\d.]+)%", text)
        assert match, f"no success rate printed for {version}"
        assert (int(match[1]), int(match[2])) == (ok, len(rows)) and len(rows) > 0
        assert float(match[3]) == pytest.approx(100 * ok / len(rows), abs=0.05)
    pairs = _lake_rows(sample_lake, "shadow_comparisons")
    won = sum(p["regular_vs_shadow"].startswith("regular") for p in pairs)
    lost = sum(p["regular_vs_shadow"].startswith("shadow") for p in pairs)
    assert pairs and f"regular won {won}, shadow won {lost}" in text
    (row,) = _lake_rows(sample_lake, "impact_before_after")
    assert (
        f"before/after {row['agent_version']}: success rate {row['success_rate_before']} "
        f"({row['sessions_before']} sessions) -> {row['success_rate_after']} ({row['sessions_after']} sessions)"
    ) in text
    assert "heuristic" in text  # the judge is named, never passed off as a model
    images = png_images(notebook)
    assert len(images) >= 3 and all(img.startswith(b"\x89PNG") for img in images)
    report(capsys, "evaluation.ipynb", seconds, "the sample lake")


if __name__ == "__main__":
    paths = [Path(p) for p in sys.argv[1:]] or sorted(NOTEBOOKS.glob("*.ipynb"))
    for path in paths:
        print(f"{'stripped' if strip(path) else 'already clean'}: {path}")

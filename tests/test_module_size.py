"""No product module over 500 lines (the house rule in the developers' guide): a module that grows past it holds more
than one concept and is split, not allowed to creep. Benchmarks and tests are not product modules."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("reflexio_pipelines", "serving")
MAX_LINES = 500


def test_no_product_module_is_over_500_lines() -> None:
    modules = [path for package in PACKAGES for path in (ROOT / package).rglob("*.py")]
    assert len(modules) > 100  # the packages were found
    over = {
        str(path.relative_to(ROOT)): lines
        for path in modules
        if (lines := len(path.read_text(encoding="utf-8").splitlines())) > MAX_LINES
    }
    assert not over, f"split these modules (one concept each): {over}"

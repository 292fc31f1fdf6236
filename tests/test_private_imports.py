"""No module imports a `_private` name from another module (issue #43): a name another module needs is public.

The product packages, the benchmarks and the tests are all checked (a test that needs a helper uses its public name).
"""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("reflexio_pipelines", "serving", "benchmarks")
SCANNED = (*PACKAGES, "tests")


def _private_imports(path: Path, root: Path = ROOT) -> list[str]:
    """`file:line name` for each underscore-prefixed (not dunder) name an in-project `from ... import` takes."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        module = node.module or ""
        in_project = node.level > 0 or module.split(".")[0] in PACKAGES
        if not in_project:
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                found.append(f"{path.relative_to(root)}:{node.lineno} {alias.name}")
    return found


def _product_files() -> list[Path]:
    return sorted(p for folder in SCANNED for p in (ROOT / folder).rglob("*.py"))


def test_product_code_is_scanned() -> None:
    # Guards the check below against passing vacuously if the layout moves.
    assert len(_product_files()) > 50


def test_no_cross_module_private_import() -> None:
    offenders = [line for path in _product_files() for line in _private_imports(path)]
    assert not offenders, "import of a private name from another module (make it public):\n" + "\n".join(offenders)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("from reflexio_pipelines.search.tables import _load_table\n", ["_load_table"]),
        ("from serving.app import (\n    ok,\n    _hidden,\n)\n", ["_hidden"]),
        ("from .text import _clip as clip\n", ["_clip"]),
        ("from __future__ import annotations\n", []),
        ("from reflexio_pipelines import __version__\n", []),
        ("from os.path import _get_sep\n", []),
    ],
)
def test_the_check_itself(tmp_path: Path, source: str, expected: list[str]) -> None:
    path = tmp_path / "m.py"
    path.write_text(source, encoding="utf-8")
    assert [line.split()[-1] for line in _private_imports(path, tmp_path)] == expected

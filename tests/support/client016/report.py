"""Progress table: every public method of reflexio-client 0.2.16 against a live service, OK / missing / error.

    .venv/bin/python -m tests.support.client016.report [--out FILE]

Learns the shared test lake (tests/support/learned.py) in a temporary directory, serves it on 127.0.0.1, runs the
driver in the client's Python 3.12 venv and prints one line per method plus the totals.
"""

from __future__ import annotations

import argparse
import tempfile
from collections import Counter
from pathlib import Path

from tests.support.client016 import drive
from tests.support.learned import serve_learned


def render(rows: list[dict]) -> str:
    """The table: totals first, then the methods that are not OK, then the OK ones."""
    counts = Counter(row["status"] for row in rows)
    lines = [
        f"reflexio-client 0.2.16 against python -m serving: {counts['ok']} ok, {counts['missing']} missing, "
        f"{counts['error']} error (of {len(rows)} methods)",
        "",
    ]
    order = {"missing": 0, "error": 1, "ok": 2}
    for row in sorted(rows, key=lambda r: (order[r["status"]], r["method"])):
        detail = f"  {row['detail']}" if row["detail"] else ""
        lines.append(f"{row['status'].upper():8} {row['method']}{detail}")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m tests.support.client016.report")
    parser.add_argument("--out", type=Path, help="also write the table to this file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="client016-") as tmp, serve_learned(Path(tmp)) as service:
        table = render(drive(service))
    print(table, end="")
    if args.out:
        args.out.write_text(table)


if __name__ == "__main__":
    main()

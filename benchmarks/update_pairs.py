"""Updates written outside the code: does a later statement replace the earlier one, and only when it should?

`python -m benchmarks.update_pairs [--pairs benchmarks/data/updates] [--limit N]`

Each pair of `benchmarks/data/updates/written_*.jsonl` (earlier / later messages of one user, written by people who
never read the extractor; `replaces` says whether the later one makes the earlier no longer hold) is learned as two
publishes a day apart through `learn()` with the built-in extractor and the offline judge, the path the service's
runs take. A pair counts when the earlier message taught something: replaced when none of those items is current
afterwards. Precision and recall of "replaced" are reported per file (the `written_dev` file was never trained or
tuned on; the `written_train*` files trained the change head, so their figures are optimistic) for the product and,
in the same process, for the words-of-change rules alone (the change head off).
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from benchmarks._common import ROOT, write_result
from reflexio_pipelines.learning.batch import UserState
from reflexio_pipelines.learning.builtin import BuiltinExtractor
from reflexio_pipelines.learning.clauses.classifier import ClauseClassifier
from reflexio_pipelines.learning.dedup import RuleDedupJudge
from reflexio_pipelines.learning.embedding import make_embedder
from reflexio_pipelines.learning.learn import learn
from reflexio_pipelines.learning.lifecycle import current_rows
from reflexio_pipelines.learning.types import Turn

DAY = 86_400
RESULT = ROOT / "benchmarks" / "results" / "update_pairs.json"


def _turns(user: str, session: str, at: int, said: str, reply: str) -> list[Turn]:
    return [
        Turn(f"{session}-{i}", at + i, f"{session}-r", user, role, text, at + i, session_id=session, turn_index=i)
        for i, (role, text) in enumerate((("user", said), ("assistant", reply)))
    ]


def _current(turns: list[list[Turn]]) -> set[tuple[str, Any]]:
    """Ids of the items current after learning each publish in turn."""
    extractor, embedder = BuiltinExtractor(), make_embedder("local")
    profiles: list[dict] = []
    playbooks: list[dict] = []
    for n, publish in enumerate(turns):
        state = UserState(
            history=[t for earlier in turns[:n] for t in earlier],
            profiles=current_rows(profiles, "profile_id", "last_modified_timestamp"),
            playbooks=current_rows(playbooks, "user_playbook_id", "created_at"),
        )
        result = learn(
            publish,
            {publish[0].user_id: state} if n else {},
            extractor,
            embedder,
            lambda entity, vectors: RuleDedupJudge(vectors),
            window=f"2026-01-0{n + 1}T00",
            run_id=f"r{n}",
            on_failure="raise",
        )
        profiles += result.profiles
        playbooks += result.playbooks
    current_profiles = current_rows(profiles, "profile_id", "last_modified_timestamp")
    current_playbooks = current_rows(playbooks, "user_playbook_id", "created_at")
    return {("p", r["profile_id"]) for r in current_profiles} | {
        ("b", r["user_playbook_id"]) for r in current_playbooks
    }


def score_pair(pair: dict) -> str:
    """ "tp", "fn", "fp", "tn", or "empty" when the earlier message taught nothing."""
    user = pair["id"]
    earlier = _turns(user, "a", 1_000, pair["earlier"], "Noted.")
    before = _current([earlier])
    if not before:
        return "empty"
    gone = not (before & _current([earlier, _turns(user, "b", 1_000 + DAY, pair["later"], "Got it.")]))
    if pair["replaces"]:
        return "tp" if gone else "fn"
    return "fp" if gone else "tn"


@contextmanager
def change_head_off() -> Iterator[None]:
    """The baseline arm: no turn is read as a change by the head (the words-of-change rules still are)."""
    original = ClauseClassifier.change_probabilities
    ClauseClassifier.change_probabilities = lambda self, turns: [0.0] * len(turns)  # type: ignore[method-assign]
    try:
        yield
    finally:
        ClauseClassifier.change_probabilities = original  # type: ignore[method-assign]


def summarise(outcomes: list[str]) -> dict[str, Any]:
    counts = {k: outcomes.count(k) for k in ("tp", "fn", "fp", "tn", "empty")}
    tp, fp, fn = counts["tp"], counts["fp"], counts["fn"]
    return {
        **counts,
        "precision": round(tp / (tp + fp), 3) if tp + fp else None,
        "recall": round(tp / (tp + fn), 3) if tp + fn else None,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=Path, default=ROOT / "benchmarks" / "data" / "updates")
    parser.add_argument("--limit", type=int, default=None, help="pairs per file (all by default)")
    parser.add_argument("--out", type=Path, default=RESULT)
    args = parser.parse_args()
    report: dict[str, Any] = {"files": {}}
    started = time.perf_counter()
    for path in sorted(args.pairs.glob("written_*.jsonl")):
        pairs = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        pairs = pairs[: args.limit]
        product = summarise([score_pair(p) for p in pairs])
        with change_head_off():
            rules = summarise([score_pair(p) for p in pairs])
        split = "development (never trained or tuned on)" if path.stem == "written_dev" else "training"
        report["files"][path.stem] = {"split": split, "pairs": len(pairs), "product": product, "words_only": rules}
        print(
            f"{path.stem:22s} {split:40s} product P {product['precision']} R {product['recall']} | "
            f"words of change only P {rules['precision']} R {rules['recall']}"
        )
    report["seconds"] = round(time.perf_counter() - started, 1)
    print(f"{report['seconds']} s; written to {write_result(args.out, report)}")


if __name__ == "__main__":
    main()

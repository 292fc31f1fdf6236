"""Extraction generalisation: the learned built-in extractor ("builtin-learned") beside the rule baseline
("builtin-rules"), both measured in the same process on text they were not tuned on.

1. **Development split of the clause corpus** (`benchmarks/data/clauses/`, rows with split == "dev" only): per-kind
   precision and recall of the clause classifier, and for both extractors the "lasting" view — a clause is learned
   (the extractor, given [an agent turn holding the row's context if any, the user turn], returns a profile or a
   playbook) against gold kind in {preference, fact, instruction, correction}, and whether a learned clause became
   the type gold says (profile for preference/fact, playbook for instruction/correction). own/ (our writing) and
   public/ (text we did not write) are reported apart and together.
2. **Through the live API** (`benchmarks/generalisation_live.py`), one `python -m serving` per extractor
   (`REFLEXIO_LLM_BUILTIN=learned|rules`) on a fresh temporary lake and `$DAGSTER_HOME`, bodies shaped as
   reflexio-client 0.2.2 sends them (one publish per session), learning by `python -m reflexio_pipelines
   materialize`, search with `POST /api/search` and the per-entity `search_profiles` / `search_user_playbooks` at
   the original client's default thresholds, top 5:
   - served@5: per probe user a filler chat session, a session stating a preference in passing, another filler;
     then a later related request (is an item carrying the preference's key words among the top 5 profiles +
     playbooks?) and an unrelated one (served wrongly?). Probes: `benchmarks/data/generalisation/probes.jsonl`,
     written for this benchmark before the extractor was run on them and not edited since.
   - junk: learned items per ordinary chat session (public dev-split request and social rows, 4-8 user turns).
   - supersession: an earlier statement, a later update or revocation learned in a later run; items learned from
     the earlier statement that are still served for a request where they matter (target 0), and whether the update
     is served.
3. **Cost**: in-process extraction wall time over the junk sessions' windows per 1,000 turns, p50/p95 per window, cold
   (the learned extractor's clause-vector memory emptied before each window).

Filler and junk chat is sampled from the corpus's public dev rows (seeded); agent answers are short stock replies.
The clause head (`clauses/clause_head.npz`) may be retrained while this runs: its sha256 is recorded when this
process loads it and before each learning run, and a change is reported as a warning.

    .venv/bin/python -m benchmarks.extraction_generalisation [--users N] [--skip-live] [--dev-limit N]
                                                             [--seed 7] [--out PATH]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import shutil
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks._common import ROOT, percentile, write_result
from benchmarks.generalisation_live import Turns, head_sha, live_run, ratio

HERE = Path(__file__).resolve().parent
PROBES = HERE / "data" / "generalisation" / "probes.jsonl"
CLAUSES = HERE / "data" / "clauses"
RESULTS = HERE / "results" / "extraction_generalisation.json"
MODES = ("learned", "rules")
REPLIES = {
    "social": ("Hi! Doing well, thanks.", "Ha, fair enough.", "Nice to hear from you!", "Take care!"),
    "request": ("Sure, here you go.", "Done. Anything else?", "Here's what I found.", "Okay, that's taken care of."),
}
TARGETS = {"junk_items_per_session_max": 0.1, "superseded_items_served_max": 0}
NOTES = [
    "top 5 = the API's top_k 5 per entity type: up to 5 profiles and 5 user playbooks per search.",
    "An item's text = a playbook's trigger and content, or a profile's content (never the rationale or custom "
    "features, which quote the user); judged against the probe's key words (word boundaries, * = prefix).",
    "false_serve_rate_non_global leaves out probes whose preference applies to every answer (reply language, "
    "reading needs): for those no request is unrelated.",
    "superseded: old_items_served counts served items learned from the earlier publish (provenance); "
    "old_by_words_served counts served items with an old key word and no new one, whatever their source.",
    "Public dev labels come from the sources' structure and phrase rules (clauses/corpus.py), like their train rows.",
]


# --- shared helpers ----------------------------------------------------------------------------------------------
def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16] if path.exists() else "missing"


def load_probes(path: Path = PROBES) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def make_window(user: str, turns: Turns, session: str) -> Any:
    from reflexio_pipelines.learning.types import Turn, Window

    made = tuple(
        Turn(f"{session}:{i}", i, session, user, t["role"], t["content"], 1_700_000_000 + i, session_id=session)
        for i, t in enumerate(turns)
    )
    return Window(user, made)


def chat_pools(rows: list[dict]) -> dict[str, list[str]]:
    """Public (not our own) dev-split request and social texts, the material of filler and junk sessions; on a clone
    where the public rows were not rebuilt (they are not committed), our own dev rows of those kinds instead (the
    report's `pools` says which)."""
    pools: dict[str, list[str]] = {"request": [], "social": []}
    for public in (True, False):
        for row in rows:
            if row["split"] == "dev" and row["kind"] in pools and row["source"].startswith("own") is not public:
                pools[row["kind"]].append(row["text"])
        if all(pools.values()):
            break
    return pools


def chat_session(rng: random.Random, pools: dict[str, list[str]], user_turns: int) -> Turns:
    """An ordinary chat: user turns drawn from the pools (opening and closing social, requests between), each
    answered briefly."""
    turns: Turns = []
    for i in range(user_turns):
        kind = "social" if i in (0, user_turns - 1) or rng.random() < 0.25 else "request"
        turns.append({"role": "user", "content": rng.choice(pools[kind])})
        turns.append({"role": "assistant", "content": rng.choice(REPLIES[kind])})
    return turns


# --- 1. development split ----------------------------------------------------------------------------------------
def dev_rows(rows: list[dict], limit: int | None, seed: int) -> list[dict]:
    dev = [r for r in rows if r["split"] == "dev"]
    if limit is None or limit >= len(dev):
        return dev
    strata: dict[tuple[str, bool], list[dict]] = {}
    for r in dev:
        strata.setdefault((r["kind"], r["source"].startswith("own")), []).append(r)
    share = limit / len(dev)
    rng = random.Random(seed)
    return [r for group in strata.values() for r in rng.sample(group, max(1, round(len(group) * share)))]


def _prf(gold: list[bool], pred: list[bool]) -> dict:
    tp = sum(g and p for g, p in zip(gold, pred))
    return {"precision": ratio(tp, sum(pred)), "recall": ratio(tp, sum(gold)), "gold": sum(gold), "pred": sum(pred)}


def dev_scores(rows: list[dict], classifier: Any, extractors: dict[str, Any]) -> dict:
    from reflexio_pipelines.learning.clauses.features import ClauseInput
    from reflexio_pipelines.learning.clauses.kinds import KINDS, LASTING, PROFILE_KINDS
    from reflexio_pipelines.learning.stated_changes import UPDATE_ONLY

    predicted = [p.kind for p in classifier.classify([ClauseInput(r["text"], r["context"]) for r in rows])]
    outputs: dict[str, list[tuple[bool, bool]]] = {name: [] for name in extractors}  # (any profile, any playbook)
    for i, r in enumerate(rows):
        turns = ([{"role": "assistant", "content": r["context"]}] if r["context"].strip() else []) + [
            {"role": "user", "content": r["text"]}
        ]
        window = make_window("dev", turns, f"dev{i}")
        for name, extractor in extractors.items():
            result = extractor.extract(window)
            # a profile that only tells of a change is learned only if it replaces an earlier item: none here
            profiles = [p for p in result.profiles if not (p.custom_features or {}).get(UPDATE_ONLY)]
            outputs[name].append((bool(profiles), bool(result.playbooks)))
    report: dict = {"rows": len(rows), "kinds": Counter(r["kind"] for r in rows), "classifier": {}, "lasting": {}}
    for origin in ("all", "own", "public"):
        idx = [i for i, r in enumerate(rows) if origin == "all" or r["source"].startswith("own") == (origin == "own")]
        gold = [rows[i]["kind"] for i in idx]
        report["classifier"][origin] = {
            k: _prf([g == k for g in gold], [predicted[i] == k for i in idx]) for k in KINDS if k in gold
        }
        report["classifier"][origin]["accuracy"] = ratio(sum(predicted[i] == rows[i]["kind"] for i in idx), len(idx))
        for name, out in outputs.items():
            lasting_gold = [rows[i]["kind"] in LASTING for i in idx]
            learned = [out[i][0] or out[i][1] for i in idx]
            row = _prf(lasting_gold, learned)
            typed = [i for i in idx if rows[i]["kind"] in LASTING and (out[i][0] or out[i][1])]
            right = sum(out[i][0] if rows[i]["kind"] in PROFILE_KINDS else out[i][1] for i in typed)
            row["right_type"] = ratio(right, len(typed))
            report["lasting"].setdefault(name, {})[origin] = row
    return report


# --- 3. cost -----------------------------------------------------------------------------------------------------
def extraction_cost(windows: list[Any], extractors: dict[str, Any]) -> dict:
    turns = sum(len(w.turns) for w in windows)
    out: dict = {"windows": len(windows), "turns": turns}
    for name, extractor in extractors.items():
        extractor.extract(windows[0])  # warm: loads the head and embedder once, not measured
        times = []
        classifier = getattr(extractor, "classifier", None)
        for window in windows:
            if classifier is not None:
                classifier.forget_vectors()  # cold: no clause seen before (the dev split scored above holds these)
            began = time.perf_counter()
            extractor.extract(window)
            times.append(time.perf_counter() - began)
        out[name] = {
            "total_s": round(sum(times), 3),
            "s_per_1k_turns": round(sum(times) / turns * 1000, 3) if turns else None,
            "p50_ms": percentile([t * 1000 for t in times], 0.5),
            "p95_ms": percentile([t * 1000 for t in times], 0.95),
        }
    if all(name in out for name in MODES):
        out["ratio_learned_over_rules"] = ratio(out["learned"]["total_s"], out["rules"]["total_s"])
    return out


# --- 2. live service ---------------------------------------------------------------------------------------------
def live_plan(probes: list[dict], users: int, pools: dict[str, list[str]], seed: int) -> dict:
    """Who publishes what, in which round. The same plan (same seed) goes to both services."""
    rng = random.Random(seed)
    served = [(f"gs{i:02d}-{p['id']}", p) for i, p in enumerate([p for p in probes if p["type"] == "served"][:users])]
    supersede = [
        (f"gx{i:02d}-{p['id']}", p) for i, p in enumerate([p for p in probes if p["type"] == "supersede"][:users])
    ]
    junk = [(f"gj{i:02d}", chat_session(rng, pools, rng.randint(4, 8))) for i in range(users)]
    round1: list[tuple[str, str, Turns]] = []
    for user, p in served:
        round1 += [(user, "filler1", chat_session(rng, pools, 3)), (user, "statement", p["session"])]
        round1.append((user, "filler2", chat_session(rng, pools, 3)))
    for user, p in supersede:
        round1 += [(user, "filler1", chat_session(rng, pools, 3)), (user, "earlier", p["earlier"])]
    round1 += [(user, "junk", turns) for user, turns in junk]
    round2 = [(user, "later", p["later"]) for user, p in supersede]
    return {"served": served, "supersede": supersede, "junk": junk, "round1": round1, "round2": round2}


# --- report ------------------------------------------------------------------------------------------------------
def _f(value: Any) -> str:
    return "-" if value is None else f"{value:.2f}" if isinstance(value, float) else str(value)


def print_table(report: dict) -> None:
    dev = report["dev"]
    print(f"\n1. development split ({dev['rows']} rows; own = our writing, public = text we did not write)")
    print("   classifier per kind: precision / recall (gold n)")
    for kind in sorted({k for part in dev["classifier"].values() for k in part if k != "accuracy"}):
        cells = [
            f"{o} {_f(c.get('precision'))}/{_f(c.get('recall'))} ({c.get('gold', 0)})"
            for o in ("all", "own", "public")
            if (c := dev["classifier"][o].get(kind))
        ]
        print(f"   {kind:<13}" + "   ".join(cells))
    print("   lasting (any profile/playbook vs gold lasting): precision / recall / right type")
    for name, parts in dev["lasting"].items():
        cells = [f"{o} {_f(r['precision'])}/{_f(r['recall'])}/{_f(r['right_type'])}" for o, r in parts.items()]
        print(f"   {name:<13}" + "   ".join(cells))
    if report.get("live"):
        print("\n2. live API (unified /api/search | per-entity searches), top 5")
        routes = ("unified", "per_entity")
        rows: list[tuple[str, Callable[[dict], list]]] = [
            ("served@5", lambda m: [m["served"][r]["served_at_5"] for r in routes]),
            ("served precision", lambda m: [m["served"][r]["served_precision"] for r in routes]),
            ("false-serve (non-global)", lambda m: [m["served"][r]["false_serve_rate_non_global"] for r in routes]),
            ("statement learned w/ keys", lambda m: [m["served"]["learned_with_keys"]]),
            (
                "junk items / chat session",
                lambda m: [m["junk"][k] for k in ("items_per_session", "filler_items_per_session")],
            ),
            ("superseded items served", lambda m: [m["supersession"][r]["old_items_served"] for r in routes]),
            ("  ... by old words", lambda m: [m["supersession"][r]["old_by_words_served"] for r in routes]),
            ("update served", lambda m: [m["supersession"][r]["update_served_rate"] for r in routes]),
        ]
        print(f"   {'measure':<27}" + "".join(f"{mode:<22}" for mode in report["live"]))
        for label, get in rows:
            cells = [" | ".join(_f(v) for v in get(m)) for m in report["live"].values()]
            print(f"   {label:<27}" + "".join(f"{c:<22}" for c in cells))
        print("   (junk row: junk sessions | filler sessions around probes)")
    cost = report["cost"]
    print(f"\n3. extraction cost over {cost['windows']} chat windows, {cost['turns']} turns")
    for name in MODES:
        c = cost[name]
        print(f"   {name:<8} {c['s_per_1k_turns']} s / 1k turns, p50 {c['p50_ms']} ms, p95 {c['p95_ms']} ms per window")
    print(f"   ratio learned/rules: {cost.get('ratio_learned_over_rules')}")


def run(
    users: int, skip_live: bool, out: Path, seed: int = 7, dev_limit: int | None = None, probes_path: Path = PROBES
) -> dict:
    from reflexio_pipelines.learning.builtin import BuiltinExtractor
    from reflexio_pipelines.learning.clauses.classifier import ClauseClassifier
    from reflexio_pipelines.learning.clauses.corpus import load_corpus
    from reflexio_pipelines.learning.rules.extractor import RuleExtractor

    started = time.monotonic()
    classifier = ClauseClassifier()
    for attempt in range(3):  # the head may be being rewritten by a retraining right now
        try:
            classifier.head  # noqa: B018  (loads it)
            break
        except Exception:
            if attempt == 2:
                raise
            time.sleep(2.0)
    loaded_sha = head_sha()
    extractors = {"learned": BuiltinExtractor(classifier), "rules": RuleExtractor()}
    corpus = load_corpus(CLAUSES)
    pools = chat_pools(corpus)
    probes = load_probes(probes_path)
    report: dict = {
        "params": {"users": users, "seed": seed, "dev_limit": dev_limit, "skip_live": skip_live},
        "pools": "public" if any(not r["source"].startswith("own") for r in corpus) else "own (public rows not built)",
        "head_sha256_16": loaded_sha,
        "probes": str(probes_path.relative_to(ROOT) if probes_path.is_relative_to(ROOT) else probes_path),
        "probes_sha256_16": _sha(probes_path),
        "targets": TARGETS,
        "notes": NOTES,
        "warnings": [],
    }
    report["dev"] = dev_scores(dev_rows(corpus, dev_limit, seed), classifier, extractors)
    print(f"dev split scored: {report['dev']['rows']} rows ({time.monotonic() - started:.0f} s)", flush=True)
    plan = live_plan(probes, users, pools, seed)
    windows = [make_window(user, turns, f"{user}-junk") for user, turns in plan["junk"]]
    report["cost"] = extraction_cost(windows, extractors)
    report["live"] = {}
    if not skip_live:
        for mode in MODES:
            work = Path(tempfile.mkdtemp(prefix=f"reflexio-generalisation-{mode}-"))
            try:
                report["live"][mode] = live_run(mode, plan, work)
                print(f"live {mode}: done ({time.monotonic() - started:.0f} s)", flush=True)
            finally:
                shutil.rmtree(work, ignore_errors=True)
    for mode, part in report["live"].items():
        part["targets_met"] = {
            "junk": (part["junk"]["items_per_session"] or 0) <= TARGETS["junk_items_per_session_max"],
            "superseded": part["supersession"]["unified"]["old_items_served"] <= TARGETS["superseded_items_served_max"],
        }
        if mode == "learned" and set(part["head_sha_per_learn_run"]) != {loaded_sha}:
            report["warnings"].append("the clause head the learning runs loaded differs from this process's")
    if head_sha() != loaded_sha:
        report["warnings"].append("the clause head file changed while the benchmark ran")
    report["seconds"] = round(time.monotonic() - started, 1)
    print_table(report)
    for warning in report["warnings"]:
        print(f"WARNING: {warning}")
    print(f"\n{report['seconds']} s; written to {write_result(out, report)}")
    return report


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--users", type=int, default=44, help="probe users per measure (default: every probe)")
    parser.add_argument("--skip-live", action="store_true", help="only the in-process measures (1 and 3)")
    parser.add_argument("--dev-limit", type=int, default=None, help="score a stratified sample of the dev rows")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--probes",
        type=Path,
        default=PROBES,
        help="probe set (probes_heldout.jsonl: written after the tuning, run once)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    return run(args.users, args.skip_live, args.out, args.seed, args.dev_limit, args.probes)


if __name__ == "__main__":
    main()

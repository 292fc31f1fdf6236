"""The `llm_calls` table: the LLM call ledger of every run, and what it cost per day and per 1,000 turns.

Writing. An asset opens a `CallLedger` for its run (`llm_ledger.recording`, or `ledger_written` here, which also
writes the rows when the work fails: a failed run's calls were paid for too) and appends what it collected with
`write_llm_calls`. Rows are only ever appended: a re-run's calls really happened, so they are new rows with new ids,
never a replacement. `call_id` is deterministic from the run, the asset and the record, so writing the same ledger
twice lands it once.

Reading. `llm_usage` sums the table per UTC day of its `window` column. For the learning asset that is the window of
the turns it learned (a backfill's calls count towards the day of the turns they were about, so per-1k-turns stays a
ratio of like to like); for evaluation and aggregation, which have no partition, it is the window the call started
in. The denominator is the `turns` table: each turn once, in the window it became durable, which is the window whose
learning run reads it. The extraction bookmarks would count a turn once per extractor group and miss turns no
group accepts, so they are not used. Only the columns summed are read, and only the windows asked for.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone

import pyarrow as pa

from reflexio_pipelines.lake.io import Lake
from reflexio_pipelines.lake.schemas import TABLES
from reflexio_pipelines.lake.windows import Granularity, configured_granularity, key_of_moment, window_of_key
from reflexio_pipelines.learning.llm_ledger import CallLedger, LLMCall, recording
from reflexio_pipelines.learning.types import stable_uuid
from reflexio_pipelines.storage import open_delta, read_delta

TABLE = "llm_calls"
#: The lock every writer of `llm_calls` holds while it commits, and erasure while it rewrites the table (see
#: privacy/erasure.WRITER_LOCKS). Not the window locks: a learning step holds its window's lock for its whole run,
#: and an evaluation's ledger for the same hour must not wait behind it.
LOCK = "llm-calls"
_USAGE_COLUMNS = ["window", "model", "stage", "outcome", "prompt_tokens", "completion_tokens", "cost_usd"]


def window_of_call(started_at_us: int, granularity: Granularity | None = None) -> str:
    """The lake's `window` value (e.g. `2026-11-30T04`) of the window a call started in (None: the deployment's
    granularity)."""
    granularity = granularity or configured_granularity()
    moment = datetime.fromtimestamp(started_at_us / 1_000_000, timezone.utc)
    return window_of_key(key_of_moment(moment, granularity), granularity)


def ledger_rows(
    calls: list[LLMCall], *, run_id: str, asset: str, window: str | None, granularity: Granularity | None = None
) -> list[dict]:
    """`llm_calls` rows for the given records (pure; the same records give the same rows and ids).

    `window` is the partition's window of a window-partitioned asset; None places each call in the window of its
    start time, at `granularity` (None: the deployment's). Two records identical in every field (possible when
    threads start calls in the same microsecond) still get distinct ids: the id includes how many identical records
    came before.
    """
    seen: Counter[tuple] = Counter()
    rows = []
    for call in calls:
        row = call.row()
        identity = tuple(sorted((k, repr(v)) for k, v in row.items()))
        occurrence = seen[identity]
        seen[identity] += 1
        row["call_id"] = stable_uuid(run_id, asset, *(f"{k}={v}" for k, v in identity), str(occurrence))
        row["run_id"], row["asset"] = run_id, asset
        row["window"] = window if window is not None else window_of_call(call.started_at_us, granularity)
        rows.append(row)
    return rows


def write_llm_calls(lake: Lake, ledger: CallLedger, *, run_id: str, asset: str, window: str | None) -> int:
    """Append the ledger's calls to `llm_calls`; returns the rows written (0, and no commit, for an empty ledger
    or one already written).

    Takes the `llm-calls` lock (`LOCK`). Erasure takes it before the window locks, so call this after releasing
    any window lock of your own, never inside one.
    """
    calls = ledger.calls()
    if not calls:
        return 0
    rows = ledger_rows(calls, run_id=run_id, asset=asset, window=window)
    with lake.lock(LOCK):
        done = set(read_columns(lake, TABLE, ["call_id"], [("run_id", "=", run_id)]).column("call_id").to_pylist())
        fresh = [r for r in rows if r["call_id"] not in done]
        if fresh:
            lake.append(TABLE, pa.Table.from_pylist(fresh, schema=TABLES[TABLE]))
    return len(fresh)


@contextmanager
def ledger_written(lake: Lake, *, run_id: str, asset: str, window: str | None) -> Iterator[CallLedger]:
    """Record the LLM calls made inside the block and write them to `llm_calls` when it ends, also when it raises.

    Keep `yield`s of a generator asset outside the block: the ledger is a context variable of the current context.
    Work handed to threads must run in a copy of this context (`contextvars.copy_context().run`) to be recorded.
    """
    ledger = CallLedger()
    try:
        with recording(ledger):
            yield ledger
    finally:
        write_llm_calls(lake, ledger, run_id=run_id, asset=asset, window=window)


def read_columns(lake: Lake, name: str, columns: list[str], filters: list[tuple] | None = None) -> pa.Table:
    """Only `columns` of table `name` (partition pruning and pushdown for `filters`); empty before its first
    commit."""
    schema = TABLES[name]
    path = lake.table_path(name)
    projected = pa.schema([schema.field(c) for c in columns])
    if not (path / "_delta_log").exists():
        return projected.empty_table()
    return read_delta(open_delta(path), filters, columns).select(columns).cast(projected)


@dataclass(frozen=True)
class DailyUsage:
    """One UTC day of LLM use. Totals, then the same per 1,000 turns (None on a day without turns).

    `cost_usd` sums the calls whose model is in LiteLLM's cost map; calls of other models are counted in
    `calls_without_cost` (their models in `models_without_cost`) and `cost_usd` is None when no call had a cost.
    """

    day: str
    turns: int
    calls: int
    failed_calls: int  # attempts whose outcome was not `ok` (each retry is a call)
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None
    calls_without_cost: int
    models_without_cost: list[str]
    calls_by_stage: dict[str, int] = field(default_factory=dict)
    calls_per_1k_turns: float | None = None
    prompt_tokens_per_1k_turns: float | None = None
    completion_tokens_per_1k_turns: float | None = None
    tokens_per_1k_turns: float | None = None
    cost_usd_per_1k_turns: float | None = None


def llm_usage(lake: Lake, *, days: int | None = None, today: date | None = None) -> list[DailyUsage]:
    """LLM calls, tokens, cost and failed attempts per UTC day, with per-1k-turn figures, oldest day first.

    `days` keeps the last N days up to `today` (default: the current UTC day); None keeps every day. A day appears
    when it had calls or turns.
    """
    filters = None
    if days is not None:
        today = today or datetime.now(timezone.utc).date()
        since = (today - timedelta(days=max(1, days) - 1)).isoformat()
        # `window` values start with the day (2026-11-30T04 or 2026-11-30), so they compare like days
        filters = [("window", ">=", since), ("window", "<", (today + timedelta(days=1)).isoformat())]
    calls = read_columns(lake, TABLE, _USAGE_COLUMNS, filters).to_pylist()
    turns = Counter(w[:10] for w in read_columns(lake, "turns", ["window"], filters).column("window").to_pylist())
    per_day: dict[str, list[dict]] = defaultdict(list)
    for row in calls:
        per_day[row["window"][:10]].append(row)
    return [_day_usage(day, per_day.get(day, []), turns.get(day, 0)) for day in sorted(set(per_day) | set(turns))]


def _day_usage(day: str, rows: list[dict], turns: int) -> DailyUsage:
    costed = [r["cost_usd"] for r in rows if r["cost_usd"] is not None]
    prompt = sum(r["prompt_tokens"] for r in rows)
    completion = sum(r["completion_tokens"] for r in rows)
    cost = round(sum(costed), 6) if costed else None

    def per_1k(value: float | None, digits: int) -> float | None:
        return None if value is None or not turns else round(1000 * value / turns, digits)

    return DailyUsage(
        day=day,
        turns=turns,
        calls=len(rows),
        failed_calls=sum(r["outcome"] != "ok" for r in rows),
        prompt_tokens=prompt,
        completion_tokens=completion,
        cost_usd=cost,
        calls_without_cost=len(rows) - len(costed),
        models_without_cost=sorted({r["model"] for r in rows if r["cost_usd"] is None}),
        calls_by_stage=dict(sorted(Counter(r["stage"] for r in rows).items())),
        calls_per_1k_turns=per_1k(len(rows), 2),
        prompt_tokens_per_1k_turns=per_1k(prompt, 1),
        completion_tokens_per_1k_turns=per_1k(completion, 1),
        tokens_per_1k_turns=per_1k(prompt + completion, 1),
        cost_usd_per_1k_turns=per_1k(sum(costed) if costed else None, 6),
    )

"""The two shapes of the original's Config, and this pipeline's one: what goes in, what comes out.

The original renamed its config in 2026 (reflexio-client 0.2.16 / reflexio-ai 0.2.32): `batch_size` /
`batch_interval` became `window_size` / `stride_size` (`*_override` likewise), and the lists of extractors
(`profile_extractor_configs`, `user_playbook_extractor_configs`, `agent_success_configs`) became one extractor each
(`profile_extractor_config`, `user_playbook_extractor_config`, `agent_success_config`). Clients of both generations
talk to this service, so:

- in: either shape, or both when they agree (`to_pipeline_shape`, run by the config model on every read: files, the
  lake's stored config, set_config and update_config bodies). This pipeline keeps the lists (several extractors of
  a kind are allowed here); a singular field is the first extractor of its list. `with_stored` fills what a body of
  the new shape cannot say from the stored config, so a new client's round trip changes nothing it did not mean to:
  the other extractors of a list, an extractor's name (the new shape's is null), and this pipeline's own fields.
- out: both shapes at once (`reported`): each client reads its own fields and ignores the others', so each reads
  back the shape it wrote.
"""

from __future__ import annotations

import math
from typing import Any

#: The new shape's names and the names this pipeline keeps.
WINDOW_NAMES = {"window_size": "batch_size", "stride_size": "batch_interval"}
#: The original's idle timeout (0.2.32: how long after a session's last turn its partial window is learned; 0 = never)
#: is this pipeline's extraction quiet period (how long a user's stream is quiet before a partial window is learned).
#: "Never" has no counterpart here, so 0 is refused; get_config reports the quiet period in force (at least 1 s).
IDLE_NAMES = {"extraction_idle_timeout_seconds": "extraction_quiet_period_seconds"}
OVERRIDE_NAMES = {"window_size_override": "batch_size_override", "stride_size_override": "batch_interval_override"}
#: singular field of the new shape -> this pipeline's list.
SINGULAR = {
    "profile_extractor_config": "profile_extractor_configs",
    "user_playbook_extractor_config": "user_playbook_extractor_configs",
    "agent_success_config": "agent_success_configs",
}
_OVERRIDE_OLD_TO_NEW = {old: new for new, old in OVERRIDE_NAMES.items()}
#: The key naming an item of each list (null in the new shape, whose extractors are singletons).
ITEM_NAME = {
    "profile_extractor_configs": "extractor_name",
    "user_playbook_extractor_configs": "extractor_name",
    "agent_success_configs": "evaluation_name",
}
#: The names the new shape's nameless extractors get when nothing is stored (this pipeline's default names).
DEFAULT_ITEM_NAME = {
    "profile_extractor_configs": "default_profile_extractor",
    "user_playbook_extractor_configs": "default_playbook_extractor",
    "agent_success_configs": "default_evaluation",
}
#: What the original (0.2.32) names its singleton extractors' items (its extractors have no names of their own).
SINGLETON_ITEM_NAME = {"profile_extractor_configs": "profile", "user_playbook_extractor_configs": "playbook"}
#: The original's PlaybookAggregatorConfig fields; this pipeline's aggregation settings have more (kept from the
#: stored config when a client that does not know them sends an aggregation config).
ORIGINAL_AGGREGATION_FIELDS = frozenset(
    {"min_cluster_size", "reaggregation_trigger_count", "clustering_similarity", "direction_overlap_threshold"}
)
#: Top-level fields of this pipeline the original's Config lacks: a body without them keeps the stored values.
PIPELINE_ONLY_FIELDS = (
    "config_version",
    "session_quiet_period_seconds",
    "extraction_quiet_period_seconds",
    "holdout",
    "outcomes",
)


def singleton_alias(requested: str, plural: str, names: list[str]) -> str:
    """The name a 0.2.32 client means: its singleton name (`playbook`, `profile`) is the first configured extractor of
    the kind, unless an extractor here is really named so; any other name is itself."""
    if requested == SINGLETON_ITEM_NAME.get(plural) and requested not in names and names:
        return names[0]
    return requested


def _rename(data: dict[str, Any], names: dict[str, str], where: str, problems: list[tuple[str, str]]) -> None:
    """New names to this pipeline's, in place; both spellings are fine when they agree."""
    for new, old in names.items():
        if new not in data:
            continue
        value = data.pop(new)
        if old in data and data[old] != value:
            problems.append(
                (f"{where}{new}", f"{value!r} disagrees with {old} {data[old]!r} (the same setting; send one)")
            )
        else:
            data[old] = value


def _item(value: Any, plural: str, where: str, problems: list[tuple[str, str]]) -> Any:
    """One extractor or evaluator of the new shape in this pipeline's spelling."""
    if not isinstance(value, dict):
        return value  # the model's type check names it
    item = dict(value)
    _rename(item, OVERRIDE_NAMES, where, problems)
    name = ITEM_NAME[plural]
    if item.get(name) is None:
        item[name] = DEFAULT_ITEM_NAME[plural]
    aggregation = item.get("aggregation_config")
    if isinstance(aggregation, dict) and aggregation.get("clustering_similarity") is None:
        # null in the new shape = "the embedding model's calibrated default": this pipeline's default
        item["aggregation_config"] = {k: v for k, v in aggregation.items() if k != "clustering_similarity"}
    return item


def reported_idle_timeout(quiet_period_s: float) -> int:
    """The original's idle timeout for a quiet period: whole seconds, at least 1 (its 0 means never)."""
    return max(1, math.ceil(quiet_period_s))


def _idle_timeout(data: dict[str, Any], problems: list[tuple[str, str]]) -> None:
    """The idle timeout as the quiet period, in place. Both may come (a get_config echoed back): they agree when the
    timeout is what get_config reports for that quiet period."""
    if "extraction_idle_timeout_seconds" not in data:
        return
    value = data.pop("extraction_idle_timeout_seconds")
    quiet = data.get("extraction_quiet_period_seconds")
    if value == 0:
        problems.append(
            (
                "extraction_idle_timeout_seconds",
                "0 (never learn an idle session's partial window) is not supported: partial windows are learned once "
                "the user's stream has been quiet this many seconds; send a positive number, or use finalize_session",
            )
        )
    elif quiet is None:
        data["extraction_quiet_period_seconds"] = value
    elif isinstance(quiet, (int, float)) and value not in (quiet, reported_idle_timeout(quiet)):
        problems.append(
            (
                "extraction_idle_timeout_seconds",
                f"{value!r} disagrees with extraction_quiet_period_seconds {quiet!r} (the same setting; send one)",
            )
        )


def to_pipeline_shape(data: Any) -> Any:
    """A config mapping of either shape (or both) in this pipeline's shape; `ValueError` with (path, reason) pairs
    in `args[0]` when the two shapes in one body disagree."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    problems: list[tuple[str, str]] = []
    _rename(data, WINDOW_NAMES, "", problems)
    _idle_timeout(data, problems)
    for plural in SINGULAR.values():  # items of the old shape may carry the new override names too
        if isinstance(data.get(plural), list):
            data[plural] = [
                _item(item, plural, f"{plural}.{i}.", problems) if isinstance(item, dict) else item
                for i, item in enumerate(data[plural])
            ]
    for single, plural in SINGULAR.items():
        if single not in data:
            continue
        value = data.pop(single)
        items = [] if value is None else [_item(value, plural, f"{single}.", problems)]
        if plural not in data:
            data[plural] = items
        elif (data[plural] or [])[:1] != items:
            problems.append((single, f"disagrees with the first item of {plural} (the same extractor; send one)"))
    if problems:
        raise ValueError(problems)
    return data


def _stored_items(stored: dict[str, Any], plural: str) -> list[dict[str, Any]]:
    items = stored.get(plural)
    return [i for i in items if isinstance(i, dict)] if isinstance(items, list) else []


def _keep_own_aggregation(item: Any, stored_items: list[dict[str, Any]]) -> Any:
    """A playbook extractor's aggregation config with this pipeline's own settings kept from the stored extractor of
    the same name where the body leaves them out (the original's clients do not know them)."""
    if not isinstance(item, dict) or not isinstance(item.get("aggregation_config"), dict):
        return item
    before = next((s for s in stored_items if s.get("extractor_name") == item.get("extractor_name")), None)
    kept = (before or {}).get("aggregation_config") or {}
    own = {k: v for k, v in kept.items() if k not in ORIGINAL_AGGREGATION_FIELDS}
    return {**item, "aggregation_config": {**own, **item["aggregation_config"]}}


def with_stored(body: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """A whole-config body (set_config) completed from the stored config (this pipeline's shape, as dumped):
    a singular field replaces the first item of its list and keeps the others and the first one's name, the
    aggregation settings the original lacks and the top-level fields it lacks keep their stored values."""
    data = dict(body)
    for single, plural in SINGULAR.items():
        if single not in data or plural in data:
            continue
        value, before = data.pop(single), _stored_items(stored, plural)
        if value is None:
            data[plural] = before[1:]
            continue
        name = ITEM_NAME[plural]
        if isinstance(value, dict) and value.get(name) is None and before:
            value = {**value, name: before[0].get(name)}
        data[plural] = [value, *before[1:]]
    plural = "user_playbook_extractor_configs"
    if isinstance(data.get(plural), list):
        data[plural] = [_keep_own_aggregation(item, _stored_items(stored, plural)) for item in data[plural]]
    named = set(data) | {old for new, old in IDLE_NAMES.items() if new in data}
    data.update({k: stored[k] for k in PIPELINE_ONLY_FIELDS if k not in named and k in stored})
    return data


def patched(partial: dict[str, Any], stored: dict[str, Any]) -> dict[str, Any]:
    """update_config: the stored config with `partial`'s top-level fields replacing (not merging into) the same
    fields, whichever shape names them; `with_stored` completes a singular extractor as for set_config."""
    touched = set(partial)
    for new, old in (WINDOW_NAMES | IDLE_NAMES).items():
        if new in touched:
            touched.add(old)
    touched.update(SINGULAR[name] for name in SINGULAR if name in touched)
    base = {k: v for k, v in stored.items() if k not in touched}
    return with_stored({**base, **partial}, stored)


def reported(config: dict[str, Any]) -> dict[str, Any]:
    """A stored config (this pipeline's shape, as dumped) with the new shape's fields added: each client reads the
    fields it knows. The singular fields show the first item of each list."""
    both = dict(config)
    for new, old in WINDOW_NAMES.items():
        if old in config:
            both[new] = config[old]
    for single, plural in SINGULAR.items():
        items = _stored_items(config, plural)
        both[single] = {_OVERRIDE_OLD_TO_NEW.get(k, k): v for k, v in items[0].items()} if items else None
    return both

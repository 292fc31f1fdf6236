"""What request bodies share: size bounds, the cleaning base model (no control or invisible characters, no boolean
for a number), user ids, timestamps, statuses and time ranges."""

from __future__ import annotations

import typing
from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, Field, ValidationInfo, WithJsonSchema, field_validator, model_validator

from reflexio_pipelines.textclean import invisible_in, strip_invisible

MAX_TEXT = 100_000
MAX_ID = 256
MAX_INT64 = 2**63 - 1  # ids and times end up in Arrow int64 filters: larger numbers are a 422, not an overflow


def strip_control(value: str) -> str:
    """Remove control and invisible format characters from a text field, so that nothing invisible reaches prompts,
    indexes or analysts' terminals (`reflexio_pipelines/textclean.py`: C0 except tab/newline/CR, C1, zero-width and
    bidi characters; a joiner inside an emoji sequence or a joining script stays)."""
    return strip_invisible(value)


def _cleaned(value: Any) -> Any:
    """Strings stripped, also inside the dicts and lists a field holds (e.g. a tool call's `tool_data`)."""
    if isinstance(value, str):
        return strip_control(value)
    if isinstance(value, dict):
        return {_cleaned(k): _cleaned(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cleaned(v) for v in value]
    return value


def _takes_bool(annotation: Any) -> bool:
    if annotation is bool or annotation is Any:
        return True
    return any(_takes_bool(arg) for arg in typing.get_args(annotation))


#: Fields that name a user: refused with a 422 when they hold an invisible character, never cleaned, because
#: cleaning would make two ids one (`vic\u200btim` would read and write `victim`'s data).
ID_FIELDS = frozenset({"user_id"})


def _visible_id(value: str) -> str:
    found = invisible_in(value)
    if found is not None:
        raise ValueError(
            f"must not contain control or invisible characters (found U+{ord(found):04X}); send the id without it"
        )
    return value


class CleanModel(BaseModel):
    """Base: strips control characters from every string field; refuses them in user ids (`ID_FIELDS`)."""

    @field_validator("*", mode="before")
    @classmethod
    def _strip(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name in ID_FIELDS and isinstance(value, str):
            return _visible_id(value)
        if isinstance(value, (str, dict, list)):
            return _cleaned(value)
        if isinstance(value, bool) and not _takes_bool(cls.model_fields[info.field_name].annotation):
            # Pydantic's lax mode would read true/false as 1/0 (e.g. a start_time); the schema says number.
            raise ValueError("a boolean is not allowed here")
        return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must not be blank")
    return value


#: A user id: 1..MAX_ID characters, not only whitespace.
UserId = Annotated[str, Field(min_length=1, max_length=MAX_ID), AfterValidator(_not_blank)]

# Times are accepted as unix seconds or ISO-8601 (the original client sends datetimes) and used as unix seconds.
#: ISO-8601 or unix seconds (the schema says so, so clients and fuzzers know numbers are accepted).
Timestamp = Annotated[
    datetime, WithJsonSchema({"anyOf": [{"type": "string", "format": "date-time"}, {"type": "number"}]})
]
Status = Literal["current", "pending", "archived", "archive_in_progress"]
PlaybookStatus = Literal["pending", "approved", "rejected"]
SearchModeName = Literal["vector", "fts", "hybrid"]


class TimeRange(CleanModel):
    """Base of bodies with an optional `[start_time, end_time]` range."""

    start_time: Timestamp | None = None
    end_time: Timestamp | None = None

    @model_validator(mode="after")
    def _ordered(self) -> "TimeRange":
        if self.start_time and self.end_time and self.end_time < self.start_time:
            raise ValueError("end_time must not be before start_time")
        return self

    @property
    def start_unix(self) -> int | None:
        return None if self.start_time is None else int(self.start_time.timestamp())

    @property
    def end_unix(self) -> int | None:
        return None if self.end_time is None else int(self.end_time.timestamp())

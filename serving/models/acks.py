"""The plain acknowledgements many routes answer with, in the original's two spellings of the message field, and the
list answers `{success, <rows>, msg}`."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, create_model


class MsgResponse(BaseModel):
    """`{success, msg}`: an edit, an approval decision, a stored config."""

    success: bool
    msg: str


class MessageResponse(BaseModel):
    """`{success, message}`: the delete of one item."""

    success: bool
    message: str


def rows_response(name: str, rows: str, doc: str) -> type[BaseModel]:
    """The model `name` (also its OpenAPI schema's name) of a `{success, <rows>: [row, ...], msg}` answer: the
    original's list answers, one shape under many field names."""
    fields: dict[str, Any] = {"success": bool, rows: list[dict[str, Any]], "msg": str}
    return create_model(name, __doc__=doc, __module__=__name__, **fields)

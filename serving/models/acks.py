"""The plain acknowledgements many routes answer with, in the original's two spellings of the message field."""

from __future__ import annotations

from pydantic import BaseModel


class MsgResponse(BaseModel):
    """`{success, msg}`: an edit, an approval decision, a stored config."""

    success: bool
    msg: str


class MessageResponse(BaseModel):
    """`{success, message}`: the delete of one item."""

    success: bool
    message: str

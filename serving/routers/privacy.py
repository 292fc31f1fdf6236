"""Per-user data export and erasure (filled in by the privacy work)."""

from __future__ import annotations

from fastapi import APIRouter

router = APIRouter()

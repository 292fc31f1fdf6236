"""`"threshold": null` (what reflexio-client 0.2.16 and the 0.2.32 CLI send by default) means the route's default;
anything outside [0, 1] is still refused with the field named."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from serving.models.search import (
    SearchAgentPlaybooksRequest,
    SearchProfilesRequest,
    SearchUserPlaybooksRequest,
    UnifiedSearchRequest,
)


def test_null_threshold_is_the_default() -> None:
    assert UnifiedSearchRequest(query="x", threshold=None).threshold == 0.3
    assert SearchProfilesRequest(user_id="u", threshold=None).threshold == 0.4
    assert SearchUserPlaybooksRequest(threshold=None).threshold == 0.4
    assert SearchAgentPlaybooksRequest(threshold=None).threshold == 0.4
    assert UnifiedSearchRequest(query="x", threshold=0.7).threshold == 0.7


@pytest.mark.parametrize("bad", [-0.1, 1.5, "high"])
def test_a_threshold_outside_the_range_is_refused(bad: object) -> None:
    with pytest.raises(ValidationError) as raised:
        UnifiedSearchRequest(query="x", threshold=bad)
    assert raised.value.errors()[0]["loc"][0] == "threshold"

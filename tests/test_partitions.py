from datetime import datetime, timezone

from reflexio_pipelines.lake.windows import key_of_landing_hour, key_of_moment, landing_hours_of_key, window_of_key


def test_hourly_key_window_and_landing_hours_round_trip():
    moment = datetime(2026, 11, 30, 4, 59, 59, tzinfo=timezone.utc)
    key = key_of_moment(moment, "hourly")
    assert key == "2026-11-30-04:00"
    assert window_of_key(key, "hourly") == "2026-11-30T04"
    assert landing_hours_of_key(key, "hourly") == [("2026-11-30", "04")]
    assert key_of_landing_hour("2026-11-30", "04", "hourly") == key


def test_daily_window_covers_24_landing_hours():
    key = key_of_moment(datetime(2026, 11, 30, 23, 10, tzinfo=timezone.utc), "daily")
    assert key == "2026-11-30"
    hours = landing_hours_of_key(key, "daily")
    assert len(hours) == 24 and hours[0] == ("2026-11-30", "00") and hours[-1] == ("2026-11-30", "23")
    assert {key_of_landing_hour(d, h, "daily") for d, h in hours} == {key}

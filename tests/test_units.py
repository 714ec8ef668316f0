"""Durations and instants on the replay clock (fairshare._units; FORMATS.md: `s m h d w`, `1d2h`)."""

from __future__ import annotations

import datetime as dt
import math

import pytest

from fairshare._units import fmt_duration, format_epoch, instant, is_duration_text, parse_duration, to_utc

EPOCH = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        pytest.param("1d2h", 86400 + 7200, id="days-hours"),
        pytest.param("90", 90, id="bare-number-text"),
        pytest.param(90, 90, id="int"),
        pytest.param(2.5, 2.5, id="float"),
        pytest.param("1.5h", 5400, id="fractional-hours"),
        pytest.param("30s", 30, id="seconds"),
        pytest.param("15m", 900, id="minutes"),
        pytest.param("2w", 2 * 604800, id="weeks"),
        pytest.param("1h 30m", 5400, id="space-between-parts"),
        pytest.param(" 2d8h ", 2 * 86400 + 8 * 3600, id="surrounding-spaces"),
        pytest.param("0s", 0, id="zero-with-unit"),
        pytest.param(0, 0, id="zero"),
    ],
)
def test_parse_duration(text: object, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)
    assert isinstance(parse_duration(text), float)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        pytest.param("15x", r"expected a duration such as 30m or 1d2h.*, got '15x'", id="unknown-unit"),
        pytest.param("", "expected a duration", id="empty"),
        pytest.param("h", "expected a duration", id="unit-only"),
        pytest.param("1d2", "expected a duration", id="trailing-number"),
        pytest.param("1H", "expected a duration", id="upper-case-unit"),
        pytest.param(True, "expected a duration", id="bool"),
        pytest.param(None, "expected a duration", id="none"),
        pytest.param([1], "expected a duration", id="list"),
        pytest.param(-5, "cannot be negative", id="negative-int"),
        pytest.param(-0.5, "cannot be negative", id="negative-float"),
        pytest.param("-30", "cannot be negative", id="negative-text"),
        pytest.param("-5m", "cannot be negative", id="negative-with-unit"),
        pytest.param("nan", "finite", id="nan-text"),
        pytest.param("inf", "finite", id="inf-text"),
        pytest.param(math.inf, "finite", id="inf-float"),
        pytest.param(math.nan, "finite", id="nan-float"),
    ],
)
def test_parse_duration_rejects(value: object, message: str) -> None:
    with pytest.raises(ValueError, match=message) as info:
        parse_duration(value)
    assert "Traceback" not in str(info.value)


def test_is_duration_text() -> None:
    assert is_duration_text("1d2h")
    assert is_duration_text("30s")
    assert not is_duration_text("90")  # a bare number is a duration, but not duration *text*
    assert not is_duration_text("2026-12-15")
    assert not is_duration_text(30)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        pytest.param("2026-12-15", dt.datetime(2026, 12, 15, tzinfo=dt.UTC), id="date-text"),
        pytest.param(dt.date(2026, 12, 15), dt.datetime(2026, 12, 15, tzinfo=dt.UTC), id="date"),
        pytest.param("2026-12-01T06:30:00Z", dt.datetime(2026, 12, 1, 6, 30, tzinfo=dt.UTC), id="zulu"),
        pytest.param("2026-12-01T06:30:00", dt.datetime(2026, 12, 1, 6, 30, tzinfo=dt.UTC), id="naive-text"),
        pytest.param(
            dt.datetime(2026, 12, 1, 6, 30),
            dt.datetime(2026, 12, 1, 6, 30, tzinfo=dt.UTC),
            id="naive-datetime",
        ),
        pytest.param(
            "2026-12-01T08:30:00+02:00", dt.datetime(2026, 12, 1, 6, 30, tzinfo=dt.UTC), id="offset-converted"
        ),
        pytest.param(
            dt.datetime(2026, 12, 1, 1, 0, tzinfo=dt.timezone(dt.timedelta(hours=1))),
            dt.datetime(2026, 12, 1, 0, 0, tzinfo=dt.UTC),
            id="aware-datetime",
        ),
        pytest.param(" 2026-12-15 ", dt.datetime(2026, 12, 15, tzinfo=dt.UTC), id="spaces"),
    ],
)
def test_to_utc(value: object, expected: dt.datetime) -> None:
    got = to_utc(value)
    assert got == expected
    assert got.utcoffset() == dt.timedelta(0)


@pytest.mark.parametrize(
    "value",
    [
        pytest.param("next tuesday", id="words"),
        pytest.param("2026-13-01", id="month-13"),
        pytest.param("", id="empty"),
        pytest.param(20261215, id="number"),
        pytest.param(None, id="none"),
    ],
)
def test_to_utc_rejects(value: object) -> None:
    with pytest.raises(ValueError, match=r"expected a date \(2026-12-15\) or datetime"):
        to_utc(value)


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        pytest.param("2d", 2 * 86400, id="duration-is-relative"),
        pytest.param(3600, 3600, id="number-is-relative"),
        pytest.param("90", 90, id="number-text-is-relative"),
        pytest.param("2026-12-02", 86400, id="date-is-absolute"),
        pytest.param(dt.date(2026, 11, 30), -86400, id="date-before-epoch"),
        pytest.param("2026-12-01T00:00:00Z", 0, id="epoch-itself"),
        pytest.param(dt.datetime(2026, 12, 1, 12, 0), 43200, id="naive-datetime-is-utc"),
    ],
)
def test_instant(value: object, seconds: float) -> None:
    assert instant(value, EPOCH) == pytest.approx(seconds)


def test_instant_rejects_garbage() -> None:
    with pytest.raises(ValueError, match=r"expected a duration from t = 0 .* or a date/datetime .*'soon'"):
        instant("soon", EPOCH)
    with pytest.raises(ValueError, match="negative"):
        instant(-5, EPOCH)


def test_format_epoch_and_fmt_duration() -> None:
    assert format_epoch(dt.datetime(2026, 12, 1, 1, 0, tzinfo=dt.timezone(dt.timedelta(hours=1)))) == (
        "2026-12-01T00:00:00Z"
    )
    assert fmt_duration(0) == "0s"
    assert fmt_duration(90) == "1m30s"
    assert fmt_duration(7200) == "2h"
    assert fmt_duration(86400 + 7200) == "1d2h"
    assert fmt_duration(-90) == "-1m30s"
    # round trip
    for text in ("1d2h", "15m", "30s", "2h30m"):
        assert fmt_duration(parse_duration(text)) == text

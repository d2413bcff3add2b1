"""The freshness policy, a pure function judged with an injected clock at every boundary:
03:59 and 04:00 local, days the clock changes (zoneinfo), idle exactly at its limit, both
modes at once; and the settings file it is read from (`sessions.toml`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, tzinfo
from pathlib import Path
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.errors import ProtocolError
from restore.engine.freshness import CONTINUE, Carry, Policy, day_start, evaluate, overridden
from restore.session_policy import SettingsFile, local_zone

BERLIN = ZoneInfo("Europe/Berlin")
NEW_YORK = ZoneInfo("America/New_York")
DAILY = Policy(mode="daily")  # atHour 4
IDLE = Policy(mode="idle", idle_minutes=30)


def at(zone: tzinfo, *fields: int, fold: int = 0) -> datetime:
    """A local wall time in `zone`, as an aware UTC instant."""
    return datetime(*fields, tzinfo=zone, fold=fold).astimezone(UTC)  # type: ignore[misc]


# --- daily --------------------------------------------------------------------------------


def test_daily_continues_at_03_59_and_resets_at_04_00_local() -> None:
    last = at(BERLIN, 2026, 3, 10, 23, 30)
    assert evaluate(DAILY, last, at(BERLIN, 2026, 3, 11, 3, 59), BERLIN) == CONTINUE
    assert evaluate(DAILY, last, at(BERLIN, 2026, 3, 11, 3, 59, 59), BERLIN) == CONTINUE
    decision = evaluate(DAILY, last, at(BERLIN, 2026, 3, 11, 4, 0), BERLIN)
    assert decision.reset == "daily" and decision.at == at(BERLIN, 2026, 3, 11, 4, 0)


def test_daily_an_activity_at_04_00_belongs_to_the_new_day() -> None:
    four = at(BERLIN, 2026, 3, 11, 4, 0)
    assert evaluate(DAILY, four, four + timedelta(hours=23), BERLIN) == CONTINUE
    assert evaluate(DAILY, four - timedelta(microseconds=1), four, BERLIN).reset == "daily"
    assert evaluate(DAILY, four, four + timedelta(days=1), BERLIN).reset == "daily"


def test_daily_is_local_time_not_utc() -> None:
    last = at(NEW_YORK, 2026, 1, 15, 22, 0)  # 03:00 UTC the next day
    assert evaluate(DAILY, last, at(NEW_YORK, 2026, 1, 16, 3, 59), NEW_YORK) == CONTINUE
    assert evaluate(DAILY, last, at(NEW_YORK, 2026, 1, 16, 4, 0), NEW_YORK).reset == "daily"
    assert evaluate(DAILY, last, at(NEW_YORK, 2026, 1, 16, 3, 59), UTC).reset == "daily"


def test_daily_at_another_hour() -> None:
    policy = Policy(mode="daily", at_hour=0)
    last = at(BERLIN, 2026, 5, 1, 23, 59)
    assert evaluate(policy, last, at(BERLIN, 2026, 5, 1, 23, 59, 59), BERLIN) == CONTINUE
    assert evaluate(policy, last, at(BERLIN, 2026, 5, 2, 0, 0), BERLIN).reset == "daily"


def test_daily_on_the_day_the_clock_springs_forward_over_at_hour() -> None:
    """New York skips 02:00-03:00 on 2026-03-08: a day at 02:00 begins when the gap ends,
    03:00 EDT (07:00 UTC), and not a second earlier."""
    policy = Policy(mode="daily", at_hour=2)
    last = at(NEW_YORK, 2026, 3, 7, 23, 0)
    gap_end = datetime(2026, 3, 8, 7, 0, tzinfo=UTC)
    assert day_start(gap_end, 2, NEW_YORK) == gap_end
    assert evaluate(policy, last, gap_end - timedelta(seconds=1), NEW_YORK) == CONTINUE
    assert evaluate(policy, last, gap_end, NEW_YORK).reset == "daily"


def test_daily_at_four_on_spring_and_fall_days_is_24_hours_less_or_more_one() -> None:
    """Berlin: 2026-03-29 has 23 hours, 2026-10-25 has 25; 04:00 is 04:00 on each."""
    spring = day_start(at(BERLIN, 2026, 3, 29, 12, 0), 4, BERLIN)
    assert spring == at(BERLIN, 2026, 3, 29, 4, 0) == datetime(2026, 3, 29, 2, 0, tzinfo=UTC)
    assert spring - day_start(at(BERLIN, 2026, 3, 28, 12, 0), 4, BERLIN) == timedelta(hours=23)
    fall = day_start(at(BERLIN, 2026, 10, 25, 12, 0), 4, BERLIN)
    assert fall - day_start(at(BERLIN, 2026, 10, 24, 12, 0), 4, BERLIN) == timedelta(hours=25)
    last = at(BERLIN, 2026, 10, 25, 3, 30)  # after the repeated 02:00-03:00
    assert evaluate(DAILY, last, at(BERLIN, 2026, 10, 25, 3, 59), BERLIN) == CONTINUE
    assert evaluate(DAILY, last, at(BERLIN, 2026, 10, 25, 4, 0), BERLIN).reset == "daily"


def test_daily_at_an_hour_the_clock_passes_twice_begins_at_the_first() -> None:
    """New York passes 01:00-02:00 twice on 2026-11-01: a day at 01:00 begins at the first
    01:00 (EDT, 05:00 UTC); the second 01:00 an hour later is the same day."""
    policy = Policy(mode="daily", at_hour=1)
    first = at(NEW_YORK, 2026, 11, 1, 1, 0, fold=0)
    second = at(NEW_YORK, 2026, 11, 1, 1, 0, fold=1)
    assert first == datetime(2026, 11, 1, 5, 0, tzinfo=UTC)
    assert second - first == timedelta(hours=1)
    last = first - timedelta(minutes=1)
    assert evaluate(policy, last, first, NEW_YORK).reset == "daily"
    assert evaluate(policy, first, second, NEW_YORK) == CONTINUE


@given(
    last=st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1)),
    gap=st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=3)),
    hour=st.integers(0, 23),
    zone=st.sampled_from([BERLIN, NEW_YORK, ZoneInfo("Australia/Lord_Howe"), UTC]),
)
def test_daily_resets_exactly_when_an_at_hour_local_lies_in_between(
    last: datetime, gap: timedelta, hour: int, zone: ZoneInfo
) -> None:
    """Brute force beside the function: walk the local days between the two instants and
    see whether one's at_hour (as zoneinfo places it) falls in (last, now]."""
    last_utc = last.replace(tzinfo=UTC)
    now = last_utc + gap
    policy = Policy(mode="daily", at_hour=hour)
    day = last_utc.astimezone(zone).date() - timedelta(days=1)
    crossed = False
    while day <= now.astimezone(zone).date():
        start = datetime(day.year, day.month, day.day, hour, tzinfo=zone).astimezone(UTC)
        crossed = crossed or last_utc < start <= now
        day += timedelta(days=1)
    assert (evaluate(policy, last_utc, now, zone).reset == "daily") == crossed


# --- idle ---------------------------------------------------------------------------------


def test_idle_exactly_at_the_limit_continues_and_a_microsecond_later_resets() -> None:
    last = datetime(2026, 3, 11, 12, 0, tzinfo=UTC)
    limit = last + timedelta(minutes=30)
    assert evaluate(IDLE, last, limit - timedelta(seconds=1), UTC) == CONTINUE
    assert evaluate(IDLE, last, limit, UTC) == CONTINUE
    decision = evaluate(IDLE, last, limit + timedelta(microseconds=1), UTC)
    assert decision.reset == "idle" and decision.at == limit


def test_idle_zero_minutes_is_never() -> None:
    last = datetime(2020, 1, 1, tzinfo=UTC)
    policy = Policy(mode="idle", idle_minutes=0)
    assert evaluate(policy, last, last + timedelta(days=3000), UTC) == CONTINUE


def test_idle_ignores_days_and_daily_ignores_idle_time() -> None:
    last = at(BERLIN, 2026, 3, 11, 3, 50)
    now = at(BERLIN, 2026, 3, 11, 4, 10)  # a day began 20 minutes in
    assert evaluate(IDLE, last, now, BERLIN) == CONTINUE
    long_ago = at(BERLIN, 2026, 3, 11, 4, 30)
    assert evaluate(DAILY, long_ago, at(BERLIN, 2026, 3, 12, 3, 0), BERLIN) == CONTINUE


def test_none_never_resets() -> None:
    last = datetime(2020, 1, 1, tzinfo=UTC)
    assert evaluate(Policy(), last, last + timedelta(days=365), UTC) == CONTINUE


# --- both ---------------------------------------------------------------------------------


def test_both_resets_for_whichever_comes_first() -> None:
    policy = Policy(mode="both", idle_minutes=60)
    # Idle ran out (03:00) before the day began (04:00): idle.
    decision = evaluate(
        policy, at(BERLIN, 2026, 3, 11, 2, 0), at(BERLIN, 2026, 3, 11, 4, 30), BERLIN
    )
    assert decision.reset == "idle" and decision.at == at(BERLIN, 2026, 3, 11, 3, 0)
    # The day began (04:00) before idle ran out (04:50): daily.
    decision = evaluate(
        policy, at(BERLIN, 2026, 3, 11, 3, 50), at(BERLIN, 2026, 3, 11, 5, 0), BERLIN
    )
    assert decision.reset == "daily" and decision.at == at(BERLIN, 2026, 3, 11, 4, 0)
    # Only the day: daily; only idle: idle; neither: continue.
    assert (
        evaluate(
            policy, at(BERLIN, 2026, 3, 11, 3, 50), at(BERLIN, 2026, 3, 11, 4, 10), BERLIN
        ).reset
        == "daily"
    )
    assert (
        evaluate(policy, at(BERLIN, 2026, 3, 11, 5, 0), at(BERLIN, 2026, 3, 11, 6, 1), BERLIN).reset
        == "idle"
    )
    assert (
        evaluate(policy, at(BERLIN, 2026, 3, 11, 5, 0), at(BERLIN, 2026, 3, 11, 6, 0), BERLIN)
        == CONTINUE
    )


def test_both_on_a_tie_says_daily() -> None:
    policy = Policy(mode="both", idle_minutes=10)
    last = at(BERLIN, 2026, 3, 11, 3, 50)
    assert evaluate(policy, last, at(BERLIN, 2026, 3, 11, 4, 5), BERLIN).reset == "daily"


@given(
    last=st.datetimes(min_value=datetime(2020, 1, 1), max_value=datetime(2030, 1, 1)),
    gap=st.timedeltas(min_value=timedelta(0), max_value=timedelta(days=2)),
    minutes=st.floats(min_value=0.001, max_value=3000),
    hour=st.integers(0, 23),
)
def test_both_is_stale_exactly_when_either_is(
    last: datetime, gap: timedelta, minutes: float, hour: int
) -> None:
    last_utc, now = last.replace(tzinfo=UTC), last.replace(tzinfo=UTC) + gap
    daily = evaluate(Policy(mode="daily", at_hour=hour), last_utc, now, BERLIN)
    idle = evaluate(Policy(mode="idle", idle_minutes=minutes), last_utc, now, BERLIN)
    both = evaluate(Policy(mode="both", at_hour=hour, idle_minutes=minutes), last_utc, now, BERLIN)
    assert (both.reset is None) == (daily.reset is None and idle.reset is None)
    if daily.reset and idle.reset:
        assert daily.at is not None and idle.at is not None
        assert both.reset == ("daily" if daily.at <= idle.at else "idle")
    elif both.reset:
        assert both == (daily if daily.reset else idle)


# --- the policy's fields --------------------------------------------------------------------


def test_layers_override_field_by_field() -> None:
    policy = overridden(Policy(), {"reset": "daily", "carry": {"todos": True}})
    policy = overridden(policy, {"idleMinutes": 5, "reset": "both", "carry": {"model": False}})
    assert policy.mode == "both" and policy.at_hour == 4 and policy.idle_minutes == 5
    assert (policy.carry.model, policy.carry.permissions, policy.carry.todos) == (False, True, True)


# --- sessions.toml ------------------------------------------------------------------------


def _settings(home: Path, text: str) -> SettingsFile:
    (home / "sessions.toml").write_text(text)
    return SettingsFile(home)


def test_the_settings_file_layers_default_client_prefixes_and_call(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path,
        """
reset = "daily"
timezone = "Europe/Berlin"
[carry]
todos = true
[clients.openclaw]
reset = "idle"
idleMinutes = 30
[prefixes."direct:"]
idleMinutes = 60
[prefixes."direct:ana"]
atHour = 6
""",
    ).current()
    assert settings.zone == BERLIN
    assert settings.policy("group:x", None, None) == Policy("daily", carry=Carry(todos=True))
    assert settings.policy("group:x", "openclaw", None).mode == "idle"
    ana = settings.policy("direct:ana", "openclaw", None)
    assert (ana.mode, ana.idle_minutes, ana.at_hour) == ("idle", 60, 6)
    assert settings.policy("direct:bob", "other", {"reset": "none"}).mode == "none"


def test_no_settings_file_means_none(tmp_path: Path) -> None:
    assert SettingsFile(tmp_path).current().policy("direct:ana", None, None) == Policy()


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('reset = "weekly"', "reset"),
        ("atHour = 24", "atHour"),
        ('atHour = "4"', "atHour"),
        ("idleMinutes = -1", "idleMinutes"),
        ("idelMinutes = 5", "idelMinutes"),
        ('timezone = "Mars/Olympus"', "timezone"),
        ("[carry]\nmodels = true", "carry.models"),
        ('[carry]\nmodel = "yes"', "carry.model"),
        ('[prefixes."direct:"]\nreset = "hourly"', 'prefixes."direct:".reset'),
        ('[clients.openclaw]\nidleMinutes = "30"', "clients.openclaw.idleMinutes"),
        ('[client.openclaw]\nreset = "idle"', "client"),
        ("reset = ", ""),
    ],
)
def test_a_bad_setting_is_one_line_naming_the_file_and_the_key(
    tmp_path: Path, text: str, named: str
) -> None:
    with pytest.raises(ProtocolError) as refused:
        _settings(tmp_path, text).current()
    message = refused.value.message
    assert "\n" not in message
    assert message.startswith(f"{tmp_path / 'sessions.toml'}: ")
    assert f": {named}: " in message if named else "not TOML" in message


def test_a_call_s_bad_policy_names_its_field(tmp_path: Path) -> None:
    settings = SettingsFile(tmp_path).current()
    with pytest.raises(ProtocolError) as refused:
        settings.policy("k", None, {"carry": {"todo": True}})
    assert refused.value.data["field"] == "policy.carry.todo"


def test_an_edited_file_is_read_again(tmp_path: Path) -> None:
    settings = _settings(tmp_path, 'reset = "daily"')
    assert settings.current().policy("k", None, None).mode == "daily"
    (tmp_path / "sessions.toml").write_text('reset = "idle"\nidleMinutes = 9\n')
    assert settings.current().policy("k", None, None).mode == "idle"


def test_the_local_zone_comes_from_tz(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TZ", "America/New_York")
    assert local_zone() == (NEW_YORK, "America/New_York")
    monkeypatch.setenv("TZ", ":Europe/Berlin")
    assert local_zone()[1] == "Europe/Berlin"

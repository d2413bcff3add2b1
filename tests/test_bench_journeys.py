"""bench/journeys.py without Codex, on small sizes: every journey runs against real server
processes and checks its answers (the newest messages, every message since the boundary,
the deep and near pages), and the report names each target. Timings are not asserted."""

from __future__ import annotations

import pytest

from bench import journeys
from tests.support import fetched


def test_the_journeys_run_their_checks_and_report_every_target(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The bench builds sessiond's wheel (pip, isolated): its build backend from the wheels
    # fetched before the run, as tests/test_packaging.py's build (the run is offline).
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(fetched.build_backend()))
    result = journeys.run(threads=60, messages=800, runs=1, codex=False)
    timings = result["timings"].runs
    j1 = {"J1 cwd sessiond", "J1 all 1 sessiond", "J1 all 20 sessiond"}
    assert set(timings) == {*j1, *(f"{name} initialize" for name in j1),
                            "J2 sessiond", "J3 sessiond", "J4 deep", "J4 near"}  # fmt: skip
    assert all(timings[f"{name} initialize"][0] < timings[name][0] for name in j1)
    assert all(len(values) == 1 and values[0] > 0 for values in timings.values())
    table = journeys.render(result)
    for row in ("J1 open a window", "20 workspace folders", "`cwd` filter", "J2 click Resume",
                "J3 hand the agent its context", "from its wheel in a fresh virtual environment",
                "of which spawn → `initialize`"):  # fmt: skip
        assert row in table
    assert "deep / near (target ≤ 2x, each ≤ 20 ms)" in table
    assert "Codex not on PATH: not run" in table


def test_the_second_window_connects_to_the_server_the_first_spawned() -> None:
    """J1': the first window spawns a lingering server, every timed one connects to it
    (each connection checks its page); the report puts it beside J1 with its target."""
    result = journeys.run(threads=60, messages=800, runs=1, codex=False, wheel=False)
    second = result["second_window"].runs
    assert set(second) == {"J1' 1", "J1' 20"}
    assert all(len(v) == journeys.SECOND_WINDOWS_PER_RUN for v in second.values())
    table = journeys.render(result)
    assert "J1' a second window: connect to the running server" in table
    assert "≤ 15 ms" in table

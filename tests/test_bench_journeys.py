"""bench/journeys.py without Codex, on small sizes: every journey runs against real server
processes and checks its answers (the newest messages, every message since the boundary,
the deep and near pages), and the report names each target. Timings are not asserted."""

from __future__ import annotations

from bench import journeys


def test_the_journeys_run_their_checks_and_report_every_target() -> None:
    result = journeys.run(threads=60, messages=800, runs=1, codex=False)
    timings = result["timings"].runs
    assert set(timings) == {"J1 cwd sessiond", "J1 all 1 sessiond", "J1 all 20 sessiond",
                            "J2 sessiond", "J3 sessiond", "J4 deep", "J4 near"}  # fmt: skip
    assert all(len(values) == 1 and values[0] > 0 for values in timings.values())
    table = journeys.render(result)
    for row in ("J1 open a window", "20 workspace folders", "`cwd` filter", "J2 click Resume",
                "J3 hand the agent its context", "installed from its wheel"):  # fmt: skip
        assert row in table
    assert "deep / near (target ≤ 2x, each ≤ 20 ms)" in table
    assert "Codex not on PATH: not run" in table

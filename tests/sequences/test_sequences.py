"""Nothing a person does in sequence breaks the store: random sequences of steps on real
processes (tests/sequences/machine.py), on the embedded store and on PostgreSQL, and every
sequence that once broke it, replayed each run.

A bounded run by default (the `sequences` hypothesis profile: about a minute or two a
store); `SESSIOND_SOAK=<examples>` runs that many examples of longer sequences.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.sequences.machine import SequenceMachine

settings.register_profile(
    "sequences",
    max_examples=6,
    stateful_step_count=15,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
settings.register_profile(
    "sequences-soak",
    parent=settings.get_profile("sequences"),
    max_examples=int(os.environ.get("SESSIOND_SOAK") or 0) or 1,
    stateful_step_count=40,
)
PROFILE = settings.get_profile("sequences-soak" if os.environ.get("SESSIOND_SOAK") else "sequences")
STORES = pytest.mark.parametrize("store", ["embedded", "postgres"])

Steps = list[tuple[str, dict[str, Any]]]


@pytest.fixture
def machine(request: pytest.FixtureRequest, store: str, tmp_path: Path) -> type[SequenceMachine]:
    """The machine bound to this test's store (a fresh database per example)."""
    cluster = request.getfixturevalue("postgres") if store == "postgres" else None

    class Bound(SequenceMachine):
        pass

    Bound.cluster, Bound.base = cluster, tmp_path
    return Bound


@STORES
def test_random_sequences_keep_every_invariant(machine: type[SequenceMachine]) -> None:
    run_state_machine_as_test(machine, settings=PROFILE)


def replay(machine: type[SequenceMachine], steps: Steps) -> None:
    """A kept sequence, step by step, the invariants checked after each as hypothesis
    checks them."""
    state = machine()
    try:
        state.first_server()
        state.holds()
        for name, arguments in steps:
            getattr(state, name)(**arguments)
            state.holds()
    finally:
        state.teardown()


@dataclass(frozen=True)
class Kept:
    """A sequence the machine found failing, in its shortest form, and the bug it found.
    `open_on`: the stores where the bug is not fixed yet (the replay must fail there)."""

    bug: str
    steps: Steps
    open_on: tuple[str, ...] = ()


KEPT: dict[str, Kept] = {
    "index-upsert-after-restart": Kept(
        "issue 33 (fixed on main, 3181655): the listing row's UPSERT made the search "
        "trigger's INSERT OR IGNORE raise UNIQUE (search_dirty.threadId): a thread started, "
        "the server restarted, the thread resumed and recorded, and its row was never "
        "written again (a stale list)",
        [
            ("start", {"via": 0, "titled": False, "where": 0}),
            ("restart", {"slot": 0, "follow": False}),
            ("record", {"pick": 0, "roles": ["user"], "via": 0}),
        ],
    ),
    "index-upsert-after-kill-9-mid-record": Kept(
        "issue 33, the same: after a server killed mid-record, resumed and the record sent "
        "again, every thread/list answered StorageError",
        [
            ("start", {"via": 0, "titled": False, "where": 0}),
            ("kill9_mid_record", {"pick": 0, "roles": ["user"], "via": 0}),
        ],
    ),
    "fork-after-resume-lost-the-title": Kept(
        "a fork took the title from the latest session_meta, which a resume writes without "
        "one: a titled thread forked after a resume was untitled",
        [
            ("start", {"via": 0, "titled": True, "where": 0}),
            ("close", {"pick": 0}),
            ("resume", {"pick": 0, "via": 0}),
            ("fork", {"pick": 0, "at": None, "via": 0}),
        ],
    ),
    "rename-of-an-imported-thread-undone-by-its-next-turn": Kept(
        "the importer wrote the source's title again whenever it differed from the thread's: "
        "an imported thread renamed in sessiond got its old title back at the agent's next "
        "turn",
        [
            ("agent_starts", {"agent": "claude", "where": 0}),
            ("import_cli", {"agent": "claude"}),
            ("set_title", {"pick": 0, "via": 0}),
            ("agent_goes_on", {"pick": 0}),
            ("import_cli", {"agent": "claude"}),
        ],
    ),
    "follow-missed-a-session-in-a-new-folder": Kept(
        "serve --follow missed a session created with its folder (a new project, a new "
        "day) before the watch on the folder existed; it raced, one in five "
        "(tests/test_live.py::test_a_session_in_a_folder_new_to_a_followed_store_is_imported "
        "loses that race every time)",
        [
            ("restart", {"slot": 1, "follow": True}),
            ("start", {"via": 1, "titled": False, "where": 0}),
            ("agent_starts", {"agent": "claude", "where": 1}),
        ],
    ),
}
"""Every sequence the machine found failing, by the bug it found; replayed every run. To
keep a new one: hypothesis prints it as `state.<step>(<arguments>)` lines; each becomes a
`("<step>", {<arguments>})` here, and a bug not fixed yet names its stores in `open_on`."""


@STORES
@pytest.mark.parametrize("name", sorted(KEPT))
def test_kept_sequences_hold(
    machine: type[SequenceMachine], store: str, name: str, request: pytest.FixtureRequest
) -> None:
    kept = KEPT[name]
    if store in kept.open_on:
        request.applymarker(pytest.mark.xfail(strict=True, reason=kept.bug))
    replay(machine, kept.steps)

"""The Codex peer's rollout generator and report, without Codex: files Codex can read,
the page we expect it to answer, and a table that compares like with like."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import orjson

from bench import codex_peer
from bench.listing import FOLDERS, PAGE

ROLLOUT = re.compile(
    r"sessions/(\d{4})/(\d{2})/(\d{2})/rollout-(\1-\2-\3)T\d{2}-\d{2}-\d{2}-([0-9a-f-]{36})\.jsonl"
)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [orjson.loads(line) for line in path.read_bytes().splitlines()]


def test_list_threads_are_rollouts_with_session_meta_first(tmp_path: Path) -> None:
    count = FOLDERS * 3 + 5
    ids = codex_peer.write_list_threads(tmp_path, count)
    files = sorted(tmp_path.rglob("*.jsonl"))
    assert len(files) == len(set(ids)) == count
    by_id = {}
    for path in files:
        match = ROLLOUT.fullmatch(path.relative_to(tmp_path).as_posix())
        assert match, path
        lines = _lines(path)
        meta = lines[0]
        assert meta["type"] == "session_meta"
        assert meta["payload"]["id"] == match.group(5)
        assert meta["payload"]["cwd"].startswith("/work/project-")
        assert meta["payload"]["model_provider"] == codex_peer.PROVIDER
        assert meta["payload"]["source"] == "cli"
        assert [line["type"] for line in lines] == [
            "session_meta", "response_item", "event_msg", "response_item", "event_msg"
        ]  # fmt: skip
        assert {line["payload"]["type"] for line in lines[1:]} == {
            "message", "user_message", "agent_message"
        }  # fmt: skip
        by_id[match.group(5)] = meta["payload"]
    n = 27
    assert by_id[ids[n]]["cwd"] == f"/work/project-{n % FOLDERS}"
    assert by_id[ids[n]]["timestamp"] > by_id[ids[n - 1]]["timestamp"]


def test_expected_page_is_the_folders_newest_threads() -> None:
    ids = [f"t{n}" for n in range(FOLDERS * (PAGE + 10))]
    page = codex_peer.expected_page(ids, 3)
    assert len(page) == PAGE
    assert page[0] == f"t{len(ids) - FOLDERS + 3}"
    assert all(int(t[1:]) % FOLDERS == 3 for t in page)
    assert [int(t[1:]) for t in page] == sorted((int(t[1:]) for t in page), reverse=True)


def test_resume_thread_maps_every_item_and_counts_what_codex_rebuilds(tmp_path: Path) -> None:
    body = codex_peer.resume_body(100)
    thread_id = codex_peer.write_resume_thread(tmp_path, tmp_path / "repo", body, 0)
    (path,) = tmp_path.rglob(f"*{thread_id}.jsonl")
    lines = _lines(path)
    assert lines[0]["type"] == "session_meta"
    assert lines[0]["payload"]["id"] == thread_id
    assert lines[0]["payload"]["cwd"] == str(tmp_path / "repo")
    assert len(lines) == body.lines + 1
    events = [line["payload"]["type"] for line in lines if line["type"] == "event_msg"]
    assert events.count("user_message") == body.turns == 5  # one in 20 items is the user's
    assert events.count("user_message") + events.count("agent_message") == body.turn_items == 80
    assert events.count("token_count") == 5
    calls = [line["payload"] for line in lines if line["payload"].get("type") == "function_call"]
    assert sorted({call["name"] for call in calls}) == ["apply_patch", "shell", "update_plan"]
    outputs = {line["payload"]["call_id"] for line in lines
               if line["payload"].get("type") == "function_call_output"}  # fmt: skip
    assert outputs == {call["call_id"] for call in calls}
    assert all(orjson.loads(call["arguments"]) for call in calls)


def test_check_loaded_refuses_a_rollout_codex_did_not_fully_parse() -> None:
    good = "DEBUG codex_rollout::recorder: Resumed rollout with 79 items, thread ID: x, "
    codex_peer.check_loaded(good + "parse errors: 0\n" * 1, 79, 1)
    for log in (good + "parse errors: 2\n", "", good.replace("79", "77") + "parse errors: 0\n"):
        try:
            codex_peer.check_loaded(log, 79, 1)
        except codex_peer.CodexError:
            continue
        raise AssertionError(f"accepted {log!r}")


def test_render_puts_codex_beside_sessiond_with_the_ratio() -> None:
    rows = [
        {"kind": "list", "threads": 1000, "calls": 20, "timed_out": None, "first_start_s": 1.3,
         "first_list_ms": 117.0, "list_p50": 140.0, "db_only_p50": 7.0, "noop_ms": 0.1,
         "restart_ms": 370.0,
         "version": "codex-cli 9.9.9"},
        {"kind": "list", "threads": 100_000, "calls": 10, "timed_out": "initialize: no answer "
         "in 60 s", "timeout_s": 60.0, "version": "codex-cli 9.9.9"},
        {"kind": "resume", "items": 1000, "runs": 7, "timed_out": None, "lines": 1951,
         "mib": 0.6, "resume_ms": 70.0, "exclude_ms": 50.0, "version": "codex-cli 9.9.9"},
    ]  # fmt: skip
    ours_list = [{"threads": 1000, "index_p50": 0.7, "build_s": 0.1},
                 {"threads": 100_000, "index_p50": 0.5, "build_s": 15.5}]  # fmt: skip
    ours_resume = [{"items": 1000, "snapshot_ms": 10.0, "replay_ms": 24.0}]
    text = codex_peer.render(rows, ours_list, ours_resume)
    assert "`codex-cli 9.9.9`" in text
    assert "| 1,000 | 0.70 | 140 | 200x | 7.00 | 10x | 1.3 / 117 | 370 | 0.1 |" in text
    assert "| 100,000 | 0.50 | timed out after 60 s | — | — | — | > 60 | — | 15.5 |" in text
    assert "At 100,000 threads: initialize: no answer in 60 s" in text
    assert "| 1,000 | 10.0 | 70.0 | 7.0x | 50.0 | 5.0x | 1,951 (0.6) | 7 |" in text
    assert "Listing calls of each kind: 20 at 1,000 threads." in text

"""Damaged thread files: torn tail, BOM, garbage line, empty file, duplicates, two writers.

Each fault is made on a real data dir by a real server, then a fresh server (or the
`sessiond` command) must still list, read and resume what is there, and say what it found.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.faults.helpers import Spawn, list_all, sessiond, start, thread_file
from tests.support.items import message
from tests.support.rpc_client import RpcError, ServerProcess


def _damaged_thread(spawn: Spawn, tmp_path: Path, home: Path) -> tuple[str, list[str]]:
    """A thread whose file gets a BOM, a garbage line mid-file and a torn last line."""
    server = spawn()
    server.initialize()
    tid, sid = start(server, tmp_path)
    items = [message(f"m{n}") for n in range(6)]
    server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": items[:3]})
    server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": items[3:]})
    list_all(server)  # the index exists too (a start alone opens it only after its answer)
    server.kill9()
    path = thread_file(home, tid)
    lines = path.read_bytes().splitlines(keepends=True)
    damaged = (
        b"\xef\xbb\xbf"
        + lines[0]
        + lines[1]
        + lines[2]
        + b"\x00\x01 this is not json\n"
        + b"".join(lines[3:])
        + b'{"v":1,"seq":99,"type":"message","id":"torn","con'
    )
    path.write_bytes(damaged)
    return tid, [i["id"] for i in items]


def test_damaged_file_still_lists_reads_and_resumes(
    spawn: Spawn, tmp_path: Path, home: Path
) -> None:
    tid, ids = _damaged_thread(spawn, tmp_path, home)
    size_before = thread_file(home, tid).stat().st_size
    server = spawn()
    server.initialize()
    assert [t["threadId"] for t in list_all(server)] == [tid]
    read = server.request("thread/read", {"threadId": tid})
    assert [i["id"] for i in read["items"] if i["type"] == "message"] == ids
    assert [s["reason"] for s in read["skippedLines"]] == ["invalid_json", "torn_tail"]
    assert thread_file(home, tid).stat().st_size == size_before  # reading changes nothing

    report = server.request("thread/resume", {"threadId": tid})
    assert report["status"] == "ready"
    assert [s["reason"] for s in report["recovery"]["skippedLines"]] == [
        "invalid_json",
        "torn_tail",
    ]
    assert report["recovery"]["bomStripped"] is True
    assert report["recovery"]["tornTailRecovered"] is True
    assert [m["id"] for m in report["messages"]["items"]] == ids
    # The torn tail was copied aside before it was cut; the garbage line is still there.
    aside = list((home / "recovered").iterdir())
    assert len(aside) == 1 and aside[0].read_bytes().startswith(b'{"v":1,"seq":99')
    assert b"this is not json" in thread_file(home, tid).read_bytes()
    # Appending after the repair produces well-formed lines.
    sid = report["session"]["sessionId"]
    server.request(
        "thread/record", {"threadId": tid, "sessionId": sid, "items": [message("after")]}
    )
    read = server.request("thread/read", {"threadId": tid})
    assert [i["content"] for i in read["items"] if i["type"] == "message"][-1] == "after"


def test_doctor_reports_skipped_lines_and_deletes_nothing(
    spawn: Spawn, tmp_path: Path, home: Path
) -> None:
    tid, _ = _damaged_thread(spawn, tmp_path, home)
    before = thread_file(home, tid).read_bytes()
    doctor = sessiond(home, "doctor")
    assert doctor.returncode == 1, doctor.stderr
    assert "line 4 skipped (invalid_json)" in doctor.stdout
    assert "skipped (torn_tail)" in doctor.stdout
    assert "BOM" in doctor.stdout
    assert "index: opened, 1 thread" in doctor.stdout
    assert thread_file(home, tid).read_bytes() == before


def test_doctor_repair_cuts_a_torn_tail_after_copying_it_aside(
    spawn: Spawn, home: Path, tmp_path: Path
) -> None:
    server = spawn()
    server.initialize()
    tid = server.request("thread/start", {"cwd": str(tmp_path)})["thread"]["threadId"]
    server.kill9()
    path = home / "threads" / tid[:2] / f"{tid}.jsonl"
    intact = path.read_bytes()
    path.write_bytes(intact + b'{"v":1,"seq":2,"type":"mess')
    assert sessiond(home, "doctor").returncode == 1  # reported, not yet repaired
    repaired = sessiond(home, "doctor", "--repair")
    assert repaired.returncode == 0, repaired.stdout
    assert "torn tail repaired" in repaired.stdout and "clean" in repaired.stdout
    assert path.read_bytes() == intact
    [aside] = (home / "recovered").iterdir()
    assert aside.read_bytes() == b'{"v":1,"seq":2,"type":"mess'
    assert sessiond(home, "doctor").returncode == 0


def test_empty_thread_file_is_not_listed_never_resumes_silently_and_doctor_moves_it_aside(
    spawn: Spawn, tmp_path: Path, home: Path
) -> None:
    """A 0-byte file is what a kill between creating a thread file and writing its first
    line leaves: a `thread/start` that was never answered."""
    server = spawn()
    server.initialize()
    kept, _ = start(server, tmp_path, title="kept")
    empty, _ = start(server, tmp_path)
    server.kill9()
    thread_file(home, empty).write_bytes(b"")
    (home / "index.sqlite3").unlink(missing_ok=True)  # if the start got to write it

    again = spawn()
    again.initialize()
    assert [t["threadId"] for t in list_all(again)] == [kept]
    assert again.request("thread/read", {"threadId": empty})["items"] == []
    report = again.request("thread/resume", {"threadId": empty})
    assert report["status"] == "needs_review" and report["session"]["sessionId"] is None
    [drift] = report["environment"]["drift"]
    assert (drift["field"], drift["recorded"], drift["severity"]) == ("cwd", None, "block")
    with pytest.raises(RpcError) as fork:
        again.request("thread/fork", {"threadId": empty})
    assert fork.value.kind == "InvalidParams"
    again.shutdown()
    assert thread_file(home, empty).read_bytes() == b""  # nothing was written to it

    found = sessiond(home, "doctor")
    assert found.returncode == 1 and "empty file" in found.stdout, found.stdout
    repaired = sessiond(home, "doctor", "--repair")
    assert repaired.returncode == 0, repaired.stdout
    assert not thread_file(home, empty).exists()
    assert [p.name for p in (home / "recovered").iterdir()] == [f"{empty}.empty"]
    assert sessiond(home, "doctor").returncode == 0


def test_recording_the_same_item_twice_stores_it_once(
    server: ServerProcess, tmp_path: Path, home: Path
) -> None:
    tid, sid = start(server, tmp_path)
    item = message("hello")
    first = server.request("thread/record", {"threadId": tid, "sessionId": sid, "items": [item]})
    again = server.request(
        "thread/record", {"threadId": tid, "sessionId": sid, "items": [item, item]}
    )
    assert first["duplicates"] == 0
    assert again == {"firstSeq": first["firstSeq"], "lastSeq": first["lastSeq"], "duplicates": 2}
    lines = thread_file(home, tid).read_text().splitlines()
    assert sum(json.loads(line)["id"] == item["id"] for line in lines) == 1


def test_second_server_process_gets_thread_busy(spawn: Spawn, tmp_path: Path, home: Path) -> None:
    first = spawn()
    first.initialize()
    tid, sid = start(first, tmp_path)
    second = spawn()
    second.initialize()
    with pytest.raises(RpcError) as busy:
        second.request("thread/resume", {"threadId": tid})
    assert busy.value.kind == "ThreadBusy"
    with pytest.raises(RpcError) as stale:
        second.request(
            "thread/record", {"threadId": tid, "sessionId": sid, "items": [message("intruder")]}
        )
    assert stale.value.kind == "StaleSession"
    for n in range(20):
        first.request(
            "thread/record", {"threadId": tid, "sessionId": sid, "items": [message(f"m{n}")]}
        )
    lines = thread_file(home, tid).read_bytes().splitlines()
    assert all(json.loads(line) for line in lines)
    assert [json.loads(line)["seq"] for line in lines] == list(range(1, 22))
    first.request("thread/close", {"threadId": tid, "sessionId": sid})
    resumed = second.request("thread/resume", {"threadId": tid})
    assert resumed["session"]["resumedFrom"] == sid

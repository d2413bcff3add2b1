"""Run one batch import in a fresh process, with the knobs the CLI does not expose.

    python -m tests.support.import_driver HOME AGENT SOURCE PARALLEL_FROM|serial [--kill-workers]
        [--batch-items N]

A fresh process because the parse workers are forked only from a process with one
thread (a pytest process may have others). Prints the summary and how many files the
workers parsed, as JSON. `--kill-workers` kills -9 every worker as soon as the pool is
up (the import must finish without them); `--batch-items` makes even small files flush
their items in several writes (the path big files take).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import signal
import sys
from pathlib import Path

import orjson

from protocol.agents import AGENT_FLAGS
from restore.agents.registry import named
from restore.imports import parse as import_parse
from restore.imports.importer import Importer
from server.cli.commands import _service
from server.config import ServerConfig


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("home")
    parser.add_argument("agent", choices=AGENT_FLAGS)
    parser.add_argument("source")
    parser.add_argument("parallel_from")
    parser.add_argument("--kill-workers", action="store_true")
    parser.add_argument("--batch-items", type=int)
    args = parser.parse_args()
    if args.batch_items:
        import_parse.BATCH_ITEMS = args.batch_items  # inherited by the forked workers
    parallel_from = None if args.parallel_from == "serial" else int(args.parallel_from)
    service = _service(ServerConfig(home=args.home))
    importer = Importer(service, named(args.agent), Path(args.source),
                        parallel_from=parallel_from)  # fmt: skip
    killed: list[int] = []

    def progress(done: int, total: int) -> None:
        if args.kill_workers and not killed:
            for child in multiprocessing.active_children():
                os.kill(child.pid or 0, signal.SIGKILL)
                killed.append(child.pid or 0)

    try:
        summary = importer.import_all(progress)
    finally:
        importer.close()
        service.close_all()
    out = {"summary": summary.to_json(), "parsedByWorkers": importer.parsed_by_workers,
           "killed": len(killed)}  # fmt: skip
    sys.stdout.buffer.write(orjson.dumps(out))


if __name__ == "__main__":
    main()

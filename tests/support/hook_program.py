"""A real lifecycle hook for the tests: `python hook_program.py LOG MODE [ARG]`.

It appends what it read on stdin (and its pid) to LOG as one JSON line, then behaves as
MODE says: `ok` (prints nothing), `context` (prints Claude Code-style additionalContext
naming the thread), `slow-context` (the same after ARG seconds), `plain-context`
(top-level additionalContext), `exit1`, `badjson`, `sleep` (ARG seconds), `touch` (creates
the file ARG).
"""

from __future__ import annotations

import json
import os
import sys
import time


def main() -> int:
    log, mode = sys.argv[1], sys.argv[2]
    arg = sys.argv[3] if len(sys.argv) > 3 else ""
    payload = json.loads(sys.stdin.read() or "{}")
    with open(log, "a") as out:
        out.write(json.dumps({"pid": os.getpid(), "mode": mode, "payload": payload}) + "\n")
    if mode == "slow-context":
        time.sleep(float(arg))
    if mode in ("context", "slow-context"):
        text = f"context for {payload['threadId']} ({payload['source']})"
        output = {
            "hookSpecificOutput": {"hookEventName": "SessionStart", "additionalContext": text}
        }
        print(json.dumps(output))
    elif mode == "plain-context":
        print(json.dumps({"additionalContext": arg}))
    elif mode == "exit1":
        print("hook could not reach its service", file=sys.stderr)
        return 1
    elif mode == "badjson":
        print("this is {not json")
    elif mode == "sleep":
        time.sleep(float(arg))
    elif mode == "touch":
        open(arg, "w").close()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The ACP front door's cost: an editor talking to AGENT through `sessiond acp` against the
same editor talking to AGENT directly, fresh processes each run, over real pipes.

    python -m bench.acp [--quick] [--only synthetic|merge|stream|agents] [--against DIR]

Four sections. `synthetic`, below: a minimal agent of the benchmark's own. `merge`: one
answer of 20,000 chunks of 1 KB sharing one message (`merge`). `stream`: one answer
streamed as a model's deltas fall, 400 chunks of 4 characters cut mid-word, of prose that
names keys and tokens (what the proxy's chunk hold, restore/sources/acp_chunks.py, works
hardest on). `agents`: the real ACP
agents of the compatibility suite (tests/agents: codex-acp, claude-agent-acp, `gemini
--acp`) against its mock model — the added latency to a prompt's first update, and
`session/load` of a 50-turn session (`first_update`, `load`).

AGENT here is a minimal ACP agent (`python -m bench.acp agent`) that streams N message
chunks per prompt, each stamped with CLOCK_MONOTONIC when written; the editor stamps it
again when it reads the line. Measured: spawn → `initialize` answered; the delivery of a
lone update, nothing queued ahead of it (median µs: the proxy's share is the difference);
a prompt's round trip with 0 and with 100 updates (median ms; through the proxy it
includes recording every update and syncing the turn's end). `--against DIR`: another
checkout's `sessiond acp` (e.g. main's) measured too, interleaved in the same run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent
UPDATES = 100
AGENT = [sys.executable, str(Path(__file__).resolve()), "agent"]
"""The benchmark's AGENT, by path: the same one behind another checkout's proxy."""
DELTAS = 400
DELTA_TEXT = (
    "Set the api key in the config first, then the token: the key is read once at start, "
    "and a secret never goes into the repository or a log. "
)


def agent_main() -> None:
    """The benchmark's AGENT: answers at once, streams `stream N` chunks per prompt."""
    out = sys.stdout.buffer
    for line in sys.stdin.buffer:
        message = orjson.loads(line)
        method, request_id = message.get("method"), message.get("id")
        if request_id is None:
            continue
        if method == "initialize":
            result: Any = {"protocolVersion": 1, "agentCapabilities": {}}
        elif method == "session/new":
            result = {"sessionId": "bench-session"}
        elif method == "session/prompt":
            params = message["params"]
            words = params["prompt"][-1]["text"].split()
            count = int(words[1])
            for n in range(count):
                update = {
                    "sessionUpdate": "agent_message_chunk",
                    "content": {"type": "text", "text": f"chunk {n} of the answer "},
                }
                if words[0] == "long":  # one message of `count` 1 KB chunks
                    update["messageId"] = "long"
                    update["content"]["text"] = "z" * 1023 + "\n"
                elif words[0] == "solid":  # ... with no break at all (the hold's worst)
                    update["messageId"] = "long"
                    update["content"]["text"] = "z" * 1024
                elif words[0] == "deltas":  # one message in 4-character deltas
                    prose = DELTA_TEXT * (4 * count // len(DELTA_TEXT) + 1)
                    update["messageId"] = "deltas"
                    update["content"]["text"] = prose[4 * n : 4 * n + 4]
                note = {
                    "sessionId": params["sessionId"],
                    "update": update,
                    "_meta": {"t": time.monotonic_ns()},
                }
                out.write(
                    orjson.dumps({"jsonrpc": "2.0", "method": "session/update", "params": note})
                    + b"\n"
                )
                out.flush()
            result = {"stopReason": "end_turn"}
        else:
            error = {"code": -32601, "message": method}
            out.write(orjson.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}) + b"\n")
            out.flush()
            continue
        out.write(orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}) + b"\n")
        out.flush()


class Editor:
    """One fresh process (AGENT, or sessiond acp in front of it) driven over its pipes."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path = REPO) -> None:
        self.began = time.perf_counter()
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            cwd=cwd,
            env=env,
        )
        self.next_id = 0
        self.delivery_ns: list[int] = []

    def request(self, method: str, params: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self.proc.stdin.write(orjson.dumps(body) + b"\n")
        self.proc.stdin.flush()
        while line := self.proc.stdout.readline():
            received = time.monotonic_ns()
            message = orjson.loads(line)
            if message.get("method") == "session/update":
                self.delivery_ns.append(received - message["params"]["_meta"]["t"])
            elif message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(message["error"])
                return message["result"]
        raise RuntimeError("the process ended before it answered")

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def modes(
    tmp: str, n: int, against: Path | None
) -> dict[str, tuple[list[str], dict[str, str], Path]]:
    """Each way the editor reaches AGENT in run `n`: direct, through this checkout's
    `sessiond acp`, and through `against`'s (argv, environment, working directory)."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "SESSIOND_CONFIG_HOME": tmp}
    found = {"direct": (AGENT, env, REPO)}
    for name, checkout in (("proxy", REPO), ("against", against)):
        if checkout is not None:
            home = Path(tmp) / f"home-{name}-{n}"
            argv = [sys.executable, "-m", "server.cli", "acp", "--home", str(home), "--", *AGENT]
            found[name] = (argv, {**env, "PYTHONPATH": str(checkout)}, checkout)
    return found


def one_run(
    argv: list[str], env: dict[str, str], cwd: str, prompts: int, where: Path = REPO
) -> dict[str, Any]:
    editor = Editor(argv, env, where)
    try:
        editor.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
        spawn_ms = (time.perf_counter() - editor.began) * 1000
        session = editor.request("session/new", {"cwd": cwd, "mcpServers": []})["sessionId"]

        def prompt(count: int) -> float:
            began = time.perf_counter()
            text = [{"type": "text", "text": f"stream {count}"}]
            editor.request("session/prompt", {"sessionId": session, "prompt": text})
            return (time.perf_counter() - began) * 1000

        prompt(1)  # the first prompt pays for lazy imports in the proxy: not a steady state
        empty = [prompt(0) for _ in range(prompts)]
        editor.delivery_ns.clear()
        for _ in range(prompts):  # one update per prompt: its delivery, nothing queued ahead
            prompt(1)
        delivery = list(editor.delivery_ns)
        full = [prompt(UPDATES) for _ in range(prompts)]
        return {"spawn": spawn_ms, "empty": empty, "full": full, "delivery": delivery}
    finally:
        editor.close()


def run(runs: int, prompts: int, against: Path | None = None) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(runs):  # interleaved, so load on the machine hits both alike
            for mode, (argv, env, where) in modes(tmp, n, against).items():
                measured = one_run(argv, env, tmp, prompts, where)
                results.setdefault(mode, {"spawn": [], "empty": [], "full": [], "delivery": []})
                results[mode]["spawn"].append(measured["spawn"])
                results[mode]["empty"] += measured["empty"]
                results[mode]["full"] += measured["full"]
                results[mode]["delivery"] += [ns / 1000 for ns in measured["delivery"]]
    return {
        mode: {key: statistics.median(values) for key, values in rows.items()}
        for mode, rows in results.items()
    }


def render(medians: dict[str, dict[str, float]]) -> str:
    direct, proxy = medians["direct"], medians["proxy"]
    rows = [
        ("spawn → `initialize` answered (ms)", "spawn", "{:.0f}"),
        ("a lone update, agent write → editor read (µs)", "delivery", "{:.0f}"),
        ("prompt round trip, 0 updates (ms)", "empty", "{:.2f}"),
        (f"prompt round trip, {UPDATES} updates (ms)", "full", "{:.2f}"),
    ]
    against = medians.get("against")
    lines = [
        "| median | editor → AGENT | editor → `sessiond acp` → AGENT | overhead |"
        + (" `--against`'s proxy | its overhead |" if against else ""),
        "|---|---:|---:|---:|" + ("---:|---:|" if against else ""),
    ]
    for label, key, shape in rows:
        extra = proxy[key] - direct[key]
        lines.append(
            f"| {label} | {shape.format(direct[key])} | {shape.format(proxy[key])} | "
            f"+{shape.format(extra)} |"
            + (
                f" {shape.format(against[key])} | +{shape.format(against[key] - direct[key])} |"
                if against
                else ""
            )
        )
    per_update = (proxy["full"] - proxy["empty"] - direct["full"] + direct["empty"]) / UPDATES
    lines += [
        "",
        f"Recording and forwarding cost {per_update * 1000:.0f} µs per update on the prompt's "
        "critical path (the 100-update round trip's overhead less the empty one's, per "
        "update); the empty prompt's overhead is the turn's records and its fdatasync.",
    ]
    return "\n".join(lines)


# --- one answer as a model streams it: 4-character deltas --------------------------------


def stream(runs: int, prompts: int, against: Path | None = None) -> dict[str, float]:
    """A prompt answered by `DELTAS` chunks of 4 characters of one message (prose naming
    keys and tokens), round trip (median ms) per way: what the chunk hold costs a turn."""
    times = _timed_prompts(runs, against, f"deltas {DELTAS}", prompts)
    return {mode: statistics.median(values) for mode, values in times.items()}


def _timed_prompts(
    runs: int,
    against: Path | None,
    words: str,
    prompts: int = 1,
    cpu: dict[str, list[float]] | None = None,
) -> dict[str, list[float]]:
    """Per way (`modes`), `prompts` round trips (ms) of the prompt `words` in each of
    `runs` fresh editors, each after one warm prompt (lazy imports, the redactor's first
    use): the steady state. `cpu`: filled with the CPU (ms, user + system) the process
    the editor talks to (the proxy, or AGENT direct) spent on each of those prompts."""
    times: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(runs):
            for mode, (argv, env, where) in modes(tmp, n, against).items():
                editor = Editor(argv, env, where)
                try:
                    editor.request("initialize", {"protocolVersion": 1, "clientCapabilities": {}})
                    opened = editor.request("session/new", {"cwd": tmp, "mcpServers": []})
                    _prompt(editor, opened["sessionId"], "stream 1")
                    for _ in range(prompts):
                        before = _cpu_ms(editor.proc.pid)
                        took = _prompt(editor, opened["sessionId"], words)
                        times.setdefault(mode, []).append(took)
                        if cpu is not None:
                            cpu.setdefault(mode, []).append(_cpu_ms(editor.proc.pid) - before)
                finally:
                    editor.close()
    return times


def _cpu_ms(pid: int) -> float:
    """A process's CPU so far (user + system, ms), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")


def _prompt(editor: Editor, session: str, words: str) -> float:
    began = time.perf_counter()
    text = [{"type": "text", "text": words}]
    editor.request("session/prompt", {"sessionId": session, "prompt": text})
    return (time.perf_counter() - began) * 1000


def render_stream(medians: dict[str, float]) -> str:
    head = "| way | prompt round trip (median ms) | over direct (ms) | per delta (µs) |"
    lines = [head, "|---|---:|---:|---:|"]
    for mode, label in (("direct", "editor → AGENT"), ("proxy", "→ `sessiond acp` →"),
                        ("against", "→ `--against`'s `sessiond acp` →")):  # fmt: skip
        if mode in medians:
            over = medians[mode] - medians["direct"]
            lines.append(
                f"| {label} | {medians[mode]:.1f} | +{over:.1f} | {over * 1000 / DELTAS:.0f} |"
            )
    return "\n".join(
        [
            f"{DELTAS} deltas of 4 characters, one message:",
            "",
            *lines,
        ]
    )


# --- one long message: 20,000 chunks merged ---------------------------------------------

MERGE_CHUNKS = 20_000


def merge(runs: int, against: Path | None = None) -> dict[str, float]:
    """One prompt answered by `MERGE_CHUNKS` 1 KB chunks of one message, round trip (ms),
    direct and through the proxy (every chunk recorded, the message merged and written at
    the turn's end), and the CPU the proxy spent on it; the same with chunks that hold no
    break at all (`solid`: the chunk hold keeps each until 4,096 characters); and the merge
    alone, in process (ThreadRecorder, ms)."""
    from restore.sources import acp as source

    cpu: dict[str, list[float]] = {}
    times = _timed_prompts(runs, against, f"long {MERGE_CHUNKS}", cpu=cpu)
    solid_cpu: dict[str, list[float]] = {}
    solid = _timed_prompts(runs, against, f"solid {MERGE_CHUNKS}", cpu=solid_cpu)
    alone = []
    for _ in range(runs):
        recorder = source.ThreadRecorder("idle")
        recorder.begin_turn("turn", [{"type": "text", "text": "go"}])
        updates = [
            {"update": {"sessionUpdate": "agent_message_chunk", "messageId": "m",
                        "content": {"type": "text", "text": "z" * 1023 + "\n"}}}
            for _ in range(MERGE_CHUNKS)
        ]  # fmt: skip
        began = time.perf_counter()
        for update in updates:
            recorder.update(update)
        recorder.end_turn("idle-2", stop_reason="end_turn")
        alone.append((time.perf_counter() - began) * 1000)
    medians = {mode: statistics.median(values) for mode, values in times.items()}
    for mode in times:
        medians[f"{mode} cpu"] = statistics.median(cpu[mode])
        medians[f"{mode} solid"] = statistics.median(solid[mode])
        medians[f"{mode} solid cpu"] = statistics.median(solid_cpu[mode])
    return {**medians, "merge": statistics.median(alone)}


def render_merge(medians: dict[str, float]) -> str:
    rows = [
        f"| {MERGE_CHUNKS:,} chunks of 1 KB, one message (median ms) | editor → AGENT | "
        "editor → `sessiond acp` → AGENT | target |"
        + (" `--against`'s proxy |" if "against" in medians else ""),
        "|---|---:|---:|---|" + ("---:|" if "against" in medians else ""),
    ]
    for label, key, target in (
        ("prompt round trip", "", True),
        ("the proxy's CPU for it", " cpu", True),
        ("prompt round trip, chunks with no break", " solid", True),
        ("the proxy's CPU for it", " solid cpu", True),
    ):
        value = medians[f"proxy{key}"]
        met = f"< 1,000: {'met' if value < 1000 else 'NOT met'}" if target else ""
        rows.append(
            f"| {label} | {medians[f'direct{key}']:.0f} | {value:.0f} | {met} |"
            + (f" {medians[f'against{key}']:.0f} |" if "against" in medians else "")
        )
    rows.append(f"| the merge alone (ThreadRecorder, in process) | — | {medians['merge']:.0f} | |")
    return "\n".join(rows)


# --- the real agents ----------------------------------------------------------------------

REAL_AGENTS = ("codex", "claude", "gemini")


class AgentEditor(Editor):
    """An editor for a real agent: notes when the first `session/update` of each prompt
    arrives (ms after the prompt was written), and allows whatever it is asked."""

    def __init__(self, argv: list[str], env: dict[str, str], cwd: Path) -> None:
        self.began = time.perf_counter()
        self.proc = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=cwd, env=env, start_new_session=True,
        )  # fmt: skip
        self.next_id = 0
        self.delivery_ns = []
        self.first_update_ms: float | None = None
        self._sent = 0.0

    def close(self) -> None:
        """End of input, then the whole process group: run direct, an agent's own children
        (codex-acp's native binary under its npm shim) would outlive it otherwise."""
        super().close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)

    def request(self, method: str, params: dict[str, Any]) -> Any:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.next_id += 1
        body = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params}
        self._sent = time.perf_counter()
        self.first_update_ms = None
        self.proc.stdin.write(orjson.dumps(body) + b"\n")
        self.proc.stdin.flush()
        while line := self.proc.stdout.readline():
            message = orjson.loads(line)
            if message.get("method") == "session/update":
                if self.first_update_ms is None:
                    self.first_update_ms = (time.perf_counter() - self._sent) * 1000
            elif "method" in message and "id" in message:  # the agent asks: allow once
                options = (message.get("params") or {}).get("options") or [{}]
                allow = next((o for o in options if o.get("kind") == "allow_once"), options[0])
                outcome = {"outcome": "selected", "optionId": allow.get("optionId")}
                reply = {"jsonrpc": "2.0", "id": message["id"], "result": {"outcome": outcome}}
                self.proc.stdin.write(orjson.dumps(reply) + b"\n")
                self.proc.stdin.flush()
            elif message.get("id") == self.next_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]
        raise RuntimeError(f"{method}: the process ended before it answered")


def _agent_place(root: Path, agent: str) -> tuple[Any, list[str], dict[str, str]]:
    from tests.agents import install
    from tests.agents.clis import AgentHome
    from tests.agents.mock_model import MockModel, Reply, Scenario

    model = MockModel(Scenario({}, done=Reply(text="A short answer from the mock."))).__enter__()
    place = AgentHome(root, model, install.bin_dir())
    if agent == "codex":
        place.write_codex_config(model="gpt-5.5")
    env = {**place.env(), "PYTHONPATH": str(REPO), "SESSIOND_CONFIG_HOME": str(root / "config")}
    return place, place.acp_command(agent), env


def first_update(agent: str, runs: int, prompts: int) -> dict[str, float]:
    """Added latency to the first update of a prompt: the same editor, the same agent and
    mock model, direct and through the proxy, fresh processes each run, interleaved."""
    samples: dict[str, list[float]] = {"direct": [], "proxy": []}
    with tempfile.TemporaryDirectory() as tmp:
        place, command, env = _agent_place(Path(tmp), agent)
        try:
            for n in range(runs):
                home = Path(tmp) / f"sessiond-{n}"
                proxy = [sys.executable, "-m", "server.cli", "acp", "--home", str(home), "--",
                         *command]  # fmt: skip
                for mode, argv in (("direct", command), ("proxy", proxy)):
                    editor = AgentEditor(argv, env, place.repo)
                    try:
                        editor.request("initialize", {"protocolVersion": 1,
                                                      "clientCapabilities": {}})  # fmt: skip
                        new = {"cwd": str(place.repo), "mcpServers": []}
                        session = editor.request("session/new", new)["sessionId"]
                        for k in range(prompts + 1):
                            words = [{"type": "text", "text": f"say something ({k})"}]
                            editor.request("session/prompt", {"sessionId": session,
                                                              "prompt": words})  # fmt: skip
                            if k and editor.first_update_ms is not None:  # the first: warmup
                                samples[mode].append(editor.first_update_ms)
                    finally:
                        editor.close()
        finally:
            place.model.__exit__(None, None, None)
    return {mode: statistics.median(values) for mode, values in samples.items()}


LOAD_TURNS = 50


def load(agent: str, runs: int) -> dict[str, Any]:
    """`session/load` of a `LOAD_TURNS`-turn session in a fresh proxy: request → answer (ms),
    and after it the first prompt's answer; beside it, the agent's own way back to its
    session direct (its session/resume, else session/load) — what a load used to wait for."""
    with tempfile.TemporaryDirectory() as tmp:
        place, command, env = _agent_place(Path(tmp), agent)
        home = Path(tmp) / "sessiond"
        proxy = [sys.executable, "-m", "server.cli", "acp", "--home", str(home), "--", *command]
        init = {"protocolVersion": 1, "clientCapabilities": {}}
        try:
            editor = AgentEditor(proxy, env, place.repo)
            try:
                editor.request("initialize", init)
                new = {"cwd": str(place.repo), "mcpServers": []}
                session = editor.request("session/new", new)["sessionId"]
                for k in range(LOAD_TURNS):
                    words = [{"type": "text", "text": f"turn {k}: tell me something"}]
                    editor.request("session/prompt", {"sessionId": session, "prompt": words})
            finally:
                editor.close()
            loads, prompted, direct = [], [], []
            for _ in range(runs):
                editor = AgentEditor(proxy, env, place.repo)
                try:
                    editor.request("initialize", init)
                    params = {"sessionId": session, "cwd": str(place.repo), "mcpServers": []}
                    began = time.perf_counter()
                    editor.request("session/load", params)
                    loads.append((time.perf_counter() - began) * 1000)
                    words = [{"type": "text", "text": "and now?"}]
                    editor.request("session/prompt", {"sessionId": session, "prompt": words})
                    prompted.append((time.perf_counter() - began) * 1000)
                finally:
                    editor.close()
            own = _agent_session_of(home, session)
            for _ in range(runs):
                editor = AgentEditor(command, env, place.repo)
                try:
                    answer = editor.request("initialize", init)
                    caps = answer.get("agentCapabilities") or {}
                    resumes = (caps.get("sessionCapabilities") or {}).get("resume") is not None
                    method = "session/resume" if resumes else "session/load"
                    params = {"sessionId": own, "cwd": str(place.repo), "mcpServers": []}
                    began = time.perf_counter()
                    try:
                        editor.request(method, params)
                        direct.append(((time.perf_counter() - began) * 1000, method))
                    except RuntimeError:
                        direct.append((float("nan"), f"{method} refused"))
                finally:
                    editor.close()
        finally:
            place.model.__exit__(None, None, None)
    return {
        "load": statistics.median(loads),
        "prompt": statistics.median(prompted),
        "own": statistics.median(ms for ms, _ in direct),
        "own_method": direct[0][1],
    }


def _agent_session_of(home: Path, thread_id: str) -> str:
    from restore.home.layout import Layout
    from restore.stores.embedded.files import ThreadStore

    items = ThreadStore(Layout(home)).read(thread_id)[0].items
    return next(i["agentSessionId"] for i in reversed(items) if i["type"] == "acp_session")


def real_agents(runs: int, prompts: int) -> dict[str, dict[str, Any]]:
    return {
        agent: {"first": first_update(agent, runs, prompts), "load": load(agent, runs)}
        for agent in REAL_AGENTS
    }


def _own(loaded: dict[str, Any]) -> str:
    if loaded["own"] != loaded["own"]:  # NaN: refused
        return str(loaded["own_method"])
    return f"{loaded['own']:.0f} ms ({loaded['own_method']})"


def render_real(results: dict[str, dict[str, Any]], prompts: int) -> str:
    from tests.agents import install

    versions = install.installed_versions(install.bin_dir())
    rows = [
        f"| agent (mock model) | first update, direct (median ms) | through `sessiond acp` | "
        f"added (target ≤ 2 ms) | `session/load`, {LOAD_TURNS} turns (target < 500 ms) | "
        "load → first prompt answered | the agent's own way back, direct |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    names = {"codex": "@agentclientprotocol/codex-acp",
             "claude": "@agentclientprotocol/claude-agent-acp",
             "gemini": "@google/gemini-cli"}  # fmt: skip
    for agent, result in results.items():
        first, loaded = result["first"], result["load"]
        added = first["proxy"] - first["direct"]
        rows.append(
            f"| {names[agent]} {versions.get(names[agent], '?')} | {first['direct']:.1f} | "
            f"{first['proxy']:.1f} | {added:+.1f}: {'met' if added <= 2 else 'NOT met'} | "
            f"{loaded['load']:.0f}: {'met' if loaded['load'] < 500 else 'NOT met'} | "
            f"{loaded['prompt']:.0f} | {_own(loaded)} |"
        )
    return "\n".join(
        [
            *rows,
            "",
            f"First update: the time from writing `session/prompt` to reading its first "
            f"`session/update`, median of {prompts} prompts per run (after one warmup prompt), "
            "the same agent direct and behind the proxy in fresh processes, interleaved.",
        ]
    )


def main() -> None:
    if sys.argv[1:2] == ["agent"]:
        agent_main()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--only",
        choices=("synthetic", "merge", "stream", "agents"),
        help="one section (default: all)",
    )
    parser.add_argument(
        "--against", type=Path, help="another checkout whose sessiond acp to measure too"
    )
    args = parser.parse_args()
    runs = 3 if args.quick else 10
    prompts = 5 if args.quick else 20
    if args.only in (None, "synthetic"):
        print(render(run(runs, prompts, args.against)))
    if args.only in (None, "stream"):
        print("\n" + render_stream(stream(runs, prompts, args.against)))
    if args.only in (None, "merge"):
        print("\n" + render_merge(merge(3, args.against)))
    if args.only in (None, "agents"):
        print("\n" + render_real(real_agents(1 if args.quick else 2, prompts), prompts))


if __name__ == "__main__":
    main()

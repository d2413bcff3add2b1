"""Redaction: which rule set (speed, false positives, coverage), and what it costs.

    python -m bench.redaction rules  [--lines 100000] [--corpus DIR ...]
    python -m bench.redaction record [--records 4000] [--rounds 5]
    python -m bench.redaction import [--sessions 1000] [--rounds 3]
    python -m bench.redaction secrets [--records 4000] [--rounds 5] [--against DIR]
    python -m bench.redaction large [--mib 16] [--against DIR]
    python -m bench.redaction hostile [--mib 16] [--seconds 20] [--against DIR] [--postgres]

`rules` runs each candidate over the same ordinary text (this repository's sources and
docs, plus any `--corpus` folders, e.g. other agents' repositories; the corpus test's own
planted secrets and the vendored rule files left out) and reports lines per second, the
findings per 10,000 lines (every finding in ordinary text counts as a false positive:
printed, to be read), and which of the corpus test's secret shapes each one catches.
Candidates: sessiond's engine (gitleaks' rules + sessiond's, default and strict), gitleaks'
rules alone through the same engine, and Yelp's detect-secrets (its default plugins, one
`scan_line` a line) when it is installed.

`record` is bench/record.py's group-commit stream with one item per record whose text is
a line of that corpus (so keywords occur as in real sessions), redaction off and default
in alternating rounds of the same run; `import` is bench/import_.py's Codex rollouts
imported by `sessiond import codex` with redaction off and default, alternating.

Issue 34's: `secrets` records 600-character messages, 16 in flight (group commit), half
the rounds each holding a secret (a token in prose, a `KEY=value`, a JSON field), half
plain, redaction on, alternating: the rate with secrets over the rate without.
`large` times one `Redactor.item` of a record of `--mib` MiB for each pathological text
(`aws_secret_access_key=` repeated, an .env template of empty `SERVICE_n_API_KEY=` lines,
prose dense with keywords, a base64 blob, a tool's JSON output): redacted or refused
(over its budget), in process. `hostile`: while one WebSocket client (a process of its
own, as another client is: its frames encoded on the bench's loop held the victim's
answers there) records `--mib` MiB pathological records back to back, another records a
small message and lists threads every 50 ms; their latencies (p50, p99, max).
`--against DIR`: another checkout (e.g. the base) measured the same way in the same run.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import orjson

REPO = Path(__file__).resolve().parent.parent
SKIP = {"tests/security/test_redaction.py", "tests/compat/test_redaction.py"}
SUFFIXES = {".py", ".md", ".ts", ".js", ".json", ".toml", ".sql", ".sh", ".rs", ".yml",
            ".yaml", ".txt", ".jsonl", ".go", ".tsx"}  # fmt: skip
MAX_LINE = 2000
"""Longer lines (minified bundles, embedded data) are left out: not ordinary text."""


def corpus_lines(roots: Iterable[Path]) -> tuple[list[str], dict[str, int]]:
    """Every text line under each root's git-tracked files (or all files, no git)."""
    lines: list[str] = []
    per_root: dict[str, int] = {}
    for root in roots:
        listed = subprocess.run(["git", "-C", str(root), "ls-files"], capture_output=True,
                                text=True)  # fmt: skip
        names = listed.stdout.split() if listed.returncode == 0 else [
            str(p.relative_to(root)) for p in root.rglob("*") if p.is_file()]  # fmt: skip
        before = len(lines)
        ours = (root / "restore/redaction/gitleaks.toml").is_file()  # a sessiond checkout
        for name in names:
            if ours and (name in SKIP or name.startswith("restore/redaction/")):
                continue
            path = root / name
            if path.suffix not in SUFFIXES or not path.is_file() or path.is_symlink():
                continue
            try:
                text = path.read_text()
            except (UnicodeDecodeError, OSError):
                continue
            lines += [line for line in text.splitlines() if line.strip() and len(line) <= MAX_LINE]
        per_root[root.name] = len(lines) - before
    return lines, per_root


# --- the candidates -----------------------------------------------------------------------


def sessiond_engine(mode: str, *, ours: bool = True) -> Callable[[str], list[tuple[str, str]]]:
    from restore.redaction import rules
    from restore.redaction.engine import Redactor

    gitleaks, own = rules.builtin()
    chosen = (*gitleaks.rules, *(own.rules if ours else ()))
    redactor = Redactor(chosen, b"bench-key-0123456789", global_allow=gitleaks.global_allow,
                        strict=mode == "strict")  # fmt: skip
    # as an item's text is looked at: the whole-item pass first, then the rules it allows
    return lambda line: [(hit.kind, hit.secret) for hit in
                         redactor.find(line, redactor.possible(orjson.dumps(line)))]  # fmt: skip


ENTROPY_PLUGINS = ("Base64HighEntropyString", "HexHighEntropyString")
_CONTEXTS: list[Any] = []
"""detect-secrets' settings contexts, kept: a collected one resets the global settings."""


def detect_secrets_engine(entropy: bool = True) -> Callable[[str], list[tuple[str, str]]] | None:
    """Yelp's detect-secrets, its default plugins (`entropy=False`: without the two
    high-entropy string plugins, which flag most words of prose when run a line at a time)."""
    try:
        from detect_secrets.core.scan import scan_line
        from detect_secrets.settings import default_settings, get_settings
    except ImportError:
        return None
    context = default_settings()
    context.__enter__()  # for the whole run: the plugins are configured once
    _CONTEXTS.append(context)
    if not entropy:
        get_settings().disable_plugins(*ENTROPY_PLUGINS)

    def find(line: str) -> list[tuple[str, str]]:
        return [(found.type, str(found.secret_value)) for found in scan_line(line)]

    return find


def measure_rules(lines: list[str], budget: int, only: str = "") -> list[dict[str, Any]]:
    from tests.security.test_redaction import SECRETS

    sample = (lines * (budget // max(len(lines), 1) + 1))[:budget]
    # made one at a time, just before each is measured: detect-secrets' settings are global
    candidates: dict[str, Callable[[], Callable[[str], list[tuple[str, str]]] | None]] = {
        "sessiond default (gitleaks + sessiond rules)": lambda: sessiond_engine("default"),
        "sessiond strict": lambda: sessiond_engine("strict"),
        "gitleaks rules alone (same engine)": lambda: sessiond_engine("default", ours=False),
        "detect-secrets 1.5 (default plugins)": detect_secrets_engine,
        "detect-secrets 1.5 without its entropy plugins": lambda: detect_secrets_engine(False),
    }
    results = []
    for name, make in candidates.items():
        if only not in name:
            continue
        find = make()
        if find is None:
            results.append({"name": name, "missing": True})
            continue
        began = time.perf_counter()
        for line in sample:
            find(line)
        speed = len(sample) / (time.perf_counter() - began)
        findings: Counter[str] = Counter()
        examples: dict[str, str] = {}
        for line in lines:
            for kind, _secret in find(line):
                findings[kind] += 1
                examples.setdefault(kind, line.strip()[:120])
        caught = []
        for kind, (secret, planted) in SECRETS.items():
            found = [s for _, s in find(planted)]
            if any(secret in s or (s in secret and len(s) >= len(secret) // 2) for s in found):
                caught.append(kind)
        results.append({
            "name": name, "lines_per_s": speed, "findings": findings, "examples": examples,
            "per_10k": sum(findings.values()) * 10_000 / len(lines), "caught": caught,
            "shapes": len(SECRETS),
        })  # fmt: skip
    return results


def render_rules(results: list[dict[str, Any]], per_root: dict[str, int], budget: int) -> str:
    total = sum(per_root.values())
    roots = ", ".join(f"{name} {count:,}" for name, count in per_root.items())
    out = [f"Ordinary text: {total:,} lines ({roots}); speed over {budget:,} lines.", "",
           "| rule set | lines/s | findings per 10,000 lines | shapes caught |",
           "|---|---:|---:|---:|"]  # fmt: skip
    for r in results:
        if r.get("missing"):
            out.append(f"| {r['name']} | not installed | | |")
            continue
        out.append(f"| {r['name']} | {r['lines_per_s']:,.0f} | {r['per_10k']:.2f} "
                   f"| {len(r['caught'])}/{r['shapes']} |")  # fmt: skip
    for r in results:
        if r.get("missing"):
            continue
        missed = sorted(set(_shape_names()) - set(r["caught"]))
        out += ["", f"{r['name']}: missed {', '.join(missed) or 'none'}"]
        for kind, count in r["findings"].most_common(12):
            out.append(f"  {count:5} {kind}: e.g. {r['examples'][kind]!r}")
    return "\n".join(out)


def _shape_names() -> list[str]:
    from tests.security.test_redaction import SECRETS

    return list(SECRETS)


# --- what it costs -------------------------------------------------------------------------


def measure_record(records: int, rounds: int, texts: list[str]) -> dict[str, list[float]]:
    from bench.record import server_throughput

    rates: dict[str, list[float]] = {"off": [], "default": []}
    with tempfile.TemporaryDirectory(dir=os.environ.get("SESSIOND_BENCH_DIR")) as tmp:
        for round_ in range(rounds):
            for mode in ("off", "default") if round_ % 2 == 0 else ("default", "off"):
                home = Path(tmp) / f"{mode}-{round_}"
                result = server_throughput(home, "group", records, 32, texts=texts,
                                           env={"SESSIOND_REDACT": mode})  # fmt: skip
                rates[mode].append(result["per_second"])
    return rates


def measure_import(sessions: int, rounds: int) -> dict[str, list[float]]:
    from bench.import_ import run_import, write_rollouts

    rates: dict[str, list[float]] = {"off": [], "default": []}
    with tempfile.TemporaryDirectory(dir=os.environ.get("SESSIOND_BENCH_DIR")) as tmp:
        codex_home = Path(tmp) / "codex"
        lines = write_rollouts(codex_home, sessions)
        for round_ in range(rounds):
            for mode in ("off", "default") if round_ % 2 == 0 else ("default", "off"):
                home = Path(tmp) / f"{mode}-{round_}"
                seconds, _ = run_import(home, codex_home / "sessions",
                                        env={"SESSIOND_REDACT": mode})  # fmt: skip
                rates[mode].append(lines / seconds)
    return rates


# --- issue 34: secrets, pathological records, a hostile client -----------------------------

SECRET_TEXTS = (
    "The deploy used the token {github} from the vault; rotate it after the release.",
    "Put DB_PASSWORD={password} in .env and restart the service before the migration.",
    '{{"client_secret": "{client}", "grant_type": "client_credentials"}} was sent.',
)


def message_texts(with_secrets: bool, count: int = 64) -> list[str]:
    """600-character messages of ordinary prose; each holding one secret if asked."""
    from tests.security.test_redaction import SECRETS

    prose = ("The tests pass on both stores and the release notes say what changed; the "
             "migration runs once, and the index is rebuilt from the files. ")  # fmt: skip
    out = []
    for n in range(count):
        head = (
            SECRET_TEXTS[n % 3].format(
                github=SECRETS["github-pat"][0],
                password=SECRETS["secret-assignment"][0],
                client=SECRETS["secret-json-field"][0],
            )
            if with_secrets
            else f"Message {n}: nothing secret in here at all, only words. "
        )
        out.append((head + prose * 8)[:600])
    return out


def measure_secrets(records: int, rounds: int, against: Path | None) -> dict[str, list[float]]:
    from bench.record import server_throughput

    rates: dict[str, list[float]] = {}
    ways = {"this": None, **({"against": against} if against else {})}
    with tempfile.TemporaryDirectory(dir=os.environ.get("SESSIOND_BENCH_DIR")) as tmp:
        for round_ in range(rounds):
            kinds = ("plain", "secrets") if round_ % 2 == 0 else ("secrets", "plain")
            for way, site in ways.items():
                for kind in kinds:
                    home = Path(tmp) / f"{way}-{kind}-{round_}"
                    texts = message_texts(kind == "secrets")
                    result = server_throughput(home, "group", records, 16, texts=texts,
                                               env={"SESSIOND_REDACT": "default"},
                                               site=site)  # fmt: skip
                    rates.setdefault(f"{way} {kind}", []).append(result["per_second"])
    return rates


def render_secrets(rates: dict[str, list[float]]) -> str:
    out = ["| checkout | plain items/s | with secrets items/s | ratio |", "|---|---:|---:|---:|"]
    for way in ("this", "against"):
        if f"{way} plain" not in rates:
            continue
        plain = statistics.median(rates[f"{way} plain"])
        secret = statistics.median(rates[f"{way} secrets"])
        out.append(f"| {way} | {plain:,.0f} | {secret:,.0f} | {secret / plain:.2f}x |")
    return "\n".join(out)


def pathological(mib: int) -> dict[str, Any]:
    """Records of `mib` MiB that cost a backtracking engine (or a naive walk) dearly."""
    from tests.security.test_redaction import SECRETS

    size = mib << 20
    b64 = "QUJDa2V5dG9rZW4rL3NlY3JldA" * (size // 26)
    tool = {"env": {f"SERVICE_{n}_API_KEY": f"value-{n}" for n in range(size // 40)}}
    return {
        "aws_secret_access_key= repeated": "aws_secret_access_key=" * (size // 22),
        ".env template of empty keys": "".join(
            f"SERVICE_{n}_API_KEY=\n" for n in range(size // 20)),
        "prose dense with keywords": ("the api key token secret password = value; " * (
            size // 44)) + SECRETS["github-pat"][1],
        "base64 blob naming key and token": b64[:size],
        "tool JSON output of 'KEY': value pairs": tool,
    }  # fmt: skip


LARGE_SCRIPT = """
import sys, time, orjson
from restore.redaction.settings import RedactionSettings, redactor_for
r = redactor_for(RedactionSettings(), b"k" * 32)
r.item({"warm": "token=abc123XYZ"})
out = {}
with open(sys.argv[1], "rb") as handle:
    records = orjson.loads(handle.read())
for name, content in records.items():
    item = {"type": "message", "id": "x", "role": "tool", "content": content} \
        if isinstance(content, str) else {"type": "operation", "id": "x", "result": content}
    began = time.process_time()
    try:
        r.item(item)
        what = "redacted"
    except Exception as exc:
        what = type(exc).__name__
    out[name] = [time.process_time() - began, what]
print(orjson.dumps(out).decode())
"""


def measure_large(mib: int, against: Path | None, limit: float) -> dict[str, dict[str, Any]]:
    """CPU seconds per pathological record, in a fresh process per checkout (`limit`: a
    checkout still at it after that many seconds is reported as such)."""
    results: dict[str, dict[str, Any]] = {}
    records = Path(tempfile.mkdtemp()) / "records.json"
    records.write_bytes(orjson.dumps(pathological(mib)))
    for way, site in {"this": REPO, **({"against": against} if against else {})}.items():
        try:
            done = subprocess.run(
                [sys.executable, "-c", LARGE_SCRIPT, str(records)], capture_output=True,
                text=True, timeout=limit, env={**os.environ, "PYTHONPATH": str(site)},
                cwd=site,
            )  # fmt: skip
            results[way] = orjson.loads(done.stdout) if done.returncode == 0 else {
                "failed": [0, done.stderr[-200:]]}  # fmt: skip
        except subprocess.TimeoutExpired:
            results[way] = {"all": [limit, f"not done after {limit:.0f} s"]}
    records.unlink()
    records.parent.rmdir()
    return results


def render_large(results: dict[str, dict[str, Any]], mib: int) -> str:
    out = [f"| {mib} MiB record | " + " | ".join(results) + " |",
           "|---|" + "---:|" * len(results)]  # fmt: skip
    names = list(next(iter(results.values())))
    for name in names:
        cells = []
        for found in results.values():
            seconds, what = found.get(name, found.get("all", [0, "?"]))
            cells.append(f"{seconds:.2f} s ({what})")
        out.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def measure_hostile(
    mib: int, seconds: float, against: Path | None, postgres: bool
) -> dict[str, dict[str, list[float]]]:
    import asyncio

    results: dict[str, dict[str, list[float]]] = {}
    ways = {"this": REPO, **({"against": against} if against else {})}
    for way, site in ways.items():
        with tempfile.TemporaryDirectory(dir=os.environ.get("SESSIOND_BENCH_DIR")) as tmp:
            results[way] = asyncio.run(_hostile(Path(tmp), site, mib, seconds, postgres))
    return results


async def _hostile(
    tmp: Path, site: Path, mib: int, seconds: float, postgres: bool
) -> dict[str, list[float]]:
    import asyncio

    from tests.support import pg_cluster
    from tests.support.rpc_client import HANG_GUARD
    from tests.support.ws_client import WsClient, server_env, wait_for_record

    home = tmp / "home"
    home.mkdir(mode=0o700)
    cluster = pg_cluster.create(tempfile.mkdtemp(prefix="sessiond-bench-pg-")) if postgres else None
    env = server_env("group", {"PYTHONPATH": str(site)})
    env["PYTHONPATH"] = str(site)
    if cluster is not None:
        env["SESSIOND_STORE"] = cluster.url(pg_cluster.fresh_database(cluster.url()))
    proc = subprocess.Popen(
        [sys.executable, "-m", "server.cli", "--home", str(home), "serve", "--ws", "0"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        cwd=site, env=env,
    )  # fmt: skip
    samples: dict[str, list[float]] = {"record": [], "list": [], "hostile": []}
    try:
        record = wait_for_record(home, proc.pid)
        victim = await WsClient.open(record, name="victim")
        theirs = await victim.request("thread/start", {"cwd": str(tmp)})
        started = multiprocessing.get_context("spawn")
        ready, results = started.Event(), started.Queue()
        attacker = started.Process(
            target=_attack, args=(record, str(tmp), mib, seconds, ready, results)
        )
        attacker.start()
        await asyncio.get_running_loop().run_in_executor(None, ready.wait, HANG_GUARD)
        stop = time.monotonic() + seconds

        async def measure() -> None:
            await asyncio.sleep(0.5)  # the first hostile record is on its way
            while time.monotonic() < stop:
                began = time.perf_counter()
                await victim.request("thread/record", {
                    "threadId": theirs["thread"]["threadId"], "sessionId": theirs["sessionId"],
                    "items": [{"type": "message", "id": str(uuid.uuid4()), "role": "user",
                               "content": "a small message"}]})  # fmt: skip
                samples["record"].append(time.perf_counter() - began)
                began = time.perf_counter()
                await victim.request("thread/list", {})
                samples["list"].append(time.perf_counter() - began)
                await asyncio.sleep(0.05)

        await measure()
        found = await asyncio.get_running_loop().run_in_executor(None, results.get, True, 900)
        samples["hostile"], samples["refused"] = found
        attacker.join()
        await victim.close()
    finally:
        proc.kill()
        proc.wait()
        if cluster is not None:
            pg_cluster.destroy(cluster.root)
    return samples


def _attack(
    record: dict[str, Any], cwd: str, mib: int, seconds: float, ready: Any, results: Any
) -> None:
    """The hostile client, in a process of its own: its 16 MiB frames encoded and sent on
    the bench's event loop held the victim's answers there (~30-40 ms a frame), which is
    the bench's latency, not the server's."""
    import asyncio

    asyncio.run(_attacking(record, cwd, mib, seconds, ready, results))


async def _attacking(
    record: dict[str, Any], cwd: str, mib: int, seconds: float, ready: Any, results: Any
) -> None:
    import asyncio

    from tests.support.ws_client import WsClient

    texts = [_fitted(t, mib << 20) for t in pathological(mib).values() if isinstance(t, str)]
    hostile = await WsClient.open(record, name="hostile")
    mine = await hostile.request("thread/start", {"cwd": cwd})
    times: list[float] = []
    refused: list[float] = []
    stop = time.monotonic() + seconds + 0.5
    n = 0
    while time.monotonic() < stop:
        began = time.perf_counter()
        answer = await hostile.start_request("thread/record", {
            "threadId": mine["thread"]["threadId"], "sessionId": mine["sessionId"],
            "items": [{"type": "message", "id": str(uuid.uuid4()), "role": "tool",
                       "content": texts[n % len(texts)]}]})  # fmt: skip
        ready.set()
        reply = await asyncio.wait_for(answer, 900)
        times.append(time.perf_counter() - began)
        refused.append(float("error" in reply))
        n += 1
    await hostile.close()
    results.put((times, refused))


def _fitted(text: str, frame: int) -> str:
    """`text` cut so that a record of it fits the frame limit (JSON escapes count)."""
    room = frame - 16384
    while (size := len(orjson.dumps(text))) > room:
        text = text[: len(text) * room // size]
    return text


def render_hostile(results: dict[str, dict[str, list[float]]], mib: int, store: str) -> str:
    out = [f"| {store}, hostile {mib} MiB records | victim `thread/record` p50 / p99 / max (ms) "
           "| `thread/list` p50 / p99 / max (ms) | victim requests | hostile records |",
           "|---|---:|---:|---:|---:|"]  # fmt: skip
    for way, samples in results.items():
        cells = []
        for key in ("record", "list"):
            values = sorted(samples[key]) or [float("nan")]
            p99 = values[min(len(values) - 1, int(0.99 * len(values)))]
            cells.append(f"{statistics.median(values) * 1000:.0f} / {p99 * 1000:.0f} / "
                         f"{values[-1] * 1000:.0f}")  # fmt: skip
        refused = int(sum(samples.get("refused", [])))
        out.append(f"| {way} | {cells[0]} | {cells[1]} | {len(samples['record'])} | "
                   f"{len(samples['hostile'])} ({refused} refused) |")  # fmt: skip
    return "\n".join(out)


def render_ratio(what: str, rates: dict[str, list[float]], unit: str) -> str:
    off, on = statistics.median(rates["off"]), statistics.median(rates["default"])
    spread = ", ".join(f"{mode}: {min(v):,.0f} to {max(v):,.0f}" for mode, v in rates.items())
    rounds = len(rates["off"])
    return (f"{what}: off {off:,.0f} {unit}, default {on:,.0f} {unit} (medians of "
            f"{rounds} alternating rounds; {spread}): on/off = {on / off:.1%}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "what", choices=("rules", "record", "import", "secrets", "large", "hostile")
    )
    parser.add_argument("--against", type=Path, help="another checkout, measured the same way")
    parser.add_argument("--mib", type=int, default=16)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--postgres", action="store_true", help="hostile: the shared store")
    parser.add_argument("--lines", type=int, default=100_000)
    parser.add_argument("--corpus", type=Path, action="append", default=[])
    parser.add_argument("--records", type=int, default=4000)
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--only", default="", help="rules: the candidates whose name has it")
    args = parser.parse_args()
    lines, per_root = corpus_lines([REPO, *args.corpus])
    if args.what == "rules":
        print(render_rules(measure_rules(lines, args.lines, args.only), per_root, args.lines))
        while _CONTEXTS:  # closed here, not by the interpreter's shutdown
            _CONTEXTS.pop().__exit__(None, None, None)
    elif args.what == "secrets":
        rates = measure_secrets(args.records, args.rounds or 5, args.against)
        print(render_secrets(rates))
    elif args.what == "large":
        print(render_large(measure_large(args.mib, args.against, 900.0), args.mib))
    elif args.what == "hostile":
        found = measure_hostile(args.mib, args.seconds, args.against, args.postgres)
        print(render_hostile(found, args.mib, "PostgreSQL" if args.postgres else "embedded"))
    elif args.what == "record":
        rates = measure_record(args.records, args.rounds or 5, lines)
        print(render_ratio("thread/record, group commit", rates, "items/s"))
    else:
        rates = measure_import(args.sessions, args.rounds or 3)
        print(render_ratio("sessiond import codex", rates, "lines/s"))


if __name__ == "__main__":
    main()

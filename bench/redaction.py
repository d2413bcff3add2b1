"""Redaction: which rule set (speed, false positives, coverage), and what it costs.

    python -m bench.redaction rules  [--lines 100000] [--corpus DIR ...]
    python -m bench.redaction record [--records 4000] [--rounds 5]
    python -m bench.redaction import [--sessions 1000] [--rounds 3]

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
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import tempfile
import time
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


def render_ratio(what: str, rates: dict[str, list[float]], unit: str) -> str:
    off, on = statistics.median(rates["off"]), statistics.median(rates["default"])
    spread = ", ".join(f"{mode}: {min(v):,.0f} to {max(v):,.0f}" for mode, v in rates.items())
    rounds = len(rates["off"])
    return (f"{what}: off {off:,.0f} {unit}, default {on:,.0f} {unit} (medians of "
            f"{rounds} alternating rounds; {spread}): on/off = {on / off:.1%}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("what", choices=("rules", "record", "import"))
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
    elif args.what == "record":
        rates = measure_record(args.records, args.rounds or 5, lines)
        print(render_ratio("thread/record, group commit", rates, "items/s"))
    else:
        rates = measure_import(args.sessions, args.rounds or 3)
        print(render_ratio("sessiond import codex", rates, "lines/s"))


if __name__ == "__main__":
    main()

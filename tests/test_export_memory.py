"""A 100,000-message thread exports in bounded memory: each format by a real `sessiond
export` process, its peak RSS (its own rusage, bench/export.py) at most 100 MiB — while
reading that thread whole takes twice that (docs/benchmarks.md, "Export")."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.export import export_peak, peak_of, write_thread

LIMIT_KIB = 100 * 1024
MESSAGES = 100_000


@pytest.fixture(scope="module")
def long_thread(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """One thread of 100,000 messages (and its calls and costs), written by the store."""
    home = tmp_path_factory.mktemp("long") / "home"
    home.mkdir()
    return home, write_thread(home, MESSAGES)


@pytest.mark.parametrize("fmt", ["md", "json", "html", "html-encrypted"])
def test_a_100k_message_thread_exports_within_100_mib(
    long_thread: tuple[Path, str], tmp_path: Path, fmt: str
) -> None:
    home, thread_id = long_thread
    out = tmp_path / "export"
    kind = fmt.split("-")[0]
    peak, _ = export_peak(home, thread_id, kind, out, encrypt=fmt.endswith("encrypted"))
    assert peak <= LIMIT_KIB, f"peak RSS {peak / 1024:.1f} MiB"
    assert out.stat().st_size > 20 * 2**20, "the whole thread was written"
    if fmt == "md":  # the measure can tell: a whole read of the same thread is over the bound
        whole, _ = peak_of(["--home", str(home), "show", thread_id, "--json"])
        assert whole > LIMIT_KIB, f"reading it whole took only {whole / 1024:.1f} MiB"

"""The HTML export in a real browser (headless Chromium, Debian's, driven by Playwright):
the encrypted page holds no readable byte of the thread and opens with its passphrase
(WebCrypto's PBKDF2 and AES-GCM, nothing but the page's own script), a wrong one is told
so, and the page's search finds what was said. Where Chromium is missing the test skips,
saying why (in CI, `SESSIOND_REQUIRE_CHROMIUM=1`, it fails instead)."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.rpc_client import ServerProcess
from tests.test_export import PLANTED, Recorded, record, sessiond

CHROMIUM = "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--disable-domain-reliability",
         "--no-pings", "--dns-prefetch-disable",
         # No name is looked up at all: the page is a file, and Chromium's own services
         # (component updates) must not reach past 127.0.0.1 (tests/support/only_loopback.py)
         "--host-resolver-rules=MAP * ~NOTFOUND",
         "--enable-features=EnableIPv6ReachabilityOverride"]  # fmt: skip
PASSPHRASE = "correct horse battery staple"


IPV6_PROBE = re.compile(r"\d+ packet\(s\) to an IPv6 address outside loopback \(no route\)")
"""Chromium's IPv6 reachability probe: a UDP connect to 2001:4860:4860::8888 its resolver
makes at start, which sends nothing (a UDP connect only picks a route; the kernel counts
it as a packet with no route). No switch of Chromium 156 leaves it out
(`EnableIPv6ReachabilityOverride` only halves it), so the test takes those from the run's
network guard itself; any other attempt — a name looked up, an IPv4 packet — still fails."""


def _only_the_ipv6_probe(request: pytest.FixtureRequest) -> None:
    guard = request.config.pluginmanager.get_plugin("sessiond-leftovers")
    network = getattr(guard, "network", None)
    if network is None:
        return
    others = [str(a) for a in network.attempts() if not IPV6_PROBE.fullmatch(a.what)]
    assert others == [], others


@pytest.fixture
def browser(request: pytest.FixtureRequest) -> Iterator[Any]:
    missing = None
    if not shutil.which(CHROMIUM):
        missing = f"{CHROMIUM} is not installed (Debian's chromium: apt-get install chromium)"
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        missing = "playwright is not installed (the test extra: pip install -e '.[test]')"
    if missing:
        if os.environ.get("SESSIOND_REQUIRE_CHROMIUM") == "1":
            pytest.fail(missing)
        pytest.skip(missing)
    with sync_playwright() as driver:
        launched = driver.chromium.launch(executable_path=CHROMIUM, args=FLAGS, headless=True)
        try:
            yield launched
        finally:
            launched.close()
    _only_the_ipv6_probe(request)


@pytest.fixture
def recorded(spawn: Callable[..., ServerProcess], tmp_path: Path) -> Recorded:
    server = spawn()
    done = record(server, tmp_path / "work")
    server.shutdown()
    return done


def offline_page(browser: Any, path: Path) -> Any:
    """A page that may load only its own file: any other request fails the test."""
    page = browser.new_page()
    asked: list[str] = []
    page.route("**/*", lambda route: (asked.append(route.request.url), route.continue_())
               if route.request.url.startswith("file://") else (asked.append(route.request.url),
                                                                 route.abort()))  # fmt: skip
    page.goto(path.as_uri())
    page.asked = asked
    return page


def test_the_encrypted_page_holds_nothing_readable_and_opens_with_its_passphrase(
    browser: Any, home: Path, recorded: Recorded, tmp_path: Path
) -> None:
    secret = tmp_path / "passphrase"
    secret.write_text(PASSPHRASE + "\n")
    out = tmp_path / "locked.html"
    done = sessiond(home, "export", recorded.tid, "--format", "html", "-o", str(out),
                    "--passphrase-file", str(secret))  # fmt: skip
    assert done.returncode == 0, done.stderr.decode()
    locked = out.read_bytes()
    for word in (*PLANTED, "Payment bug", "pytest -q", recorded.tid, "fix the"):
        assert word.encode() not in locked, f"{word!r} readable in the encrypted page"

    page = offline_page(browser, out)
    page.fill("#lock input", "not the passphrase")
    page.click("#lock button")
    page.wait_for_selector("#why:not(:empty)")
    assert page.text_content("#why") == "That passphrase does not open this transcript."

    page.fill("#lock input", PASSPHRASE)
    page.click("#lock button")
    page.wait_for_selector("#doc", timeout=120_000)  # PBKDF2's 600,000 rounds, on a busy CPU
    text = page.inner_text("body")
    for word in PLANTED:
        assert word in text or word in page.content(), word
    assert "the narwhal module rounds twice" in text
    assert page.query_selector("details.op.failed") is not None, "the failed call, marked"

    page.fill("#find input", "narwhal")
    page.wait_for_selector("#find span:text-is('1 found')")
    visible = page.eval_on_selector_all("#doc .e:not(.hidden)", "els => els.length")
    assert visible == 1
    assert [url for url in page.asked if not url.startswith("file://")] == []
    page.close()


def test_the_plain_page_searches_and_prints_every_call_open(
    browser: Any, home: Path, recorded: Recorded, tmp_path: Path
) -> None:
    out = tmp_path / "plain.html"
    done = sessiond(home, "export", recorded.tid, "--format", "html", "-o", str(out))
    assert done.returncode == 0, done.stderr.decode()
    page = offline_page(browser, out)
    assert page.title() == "Payment bug · sessiond"
    closed = page.eval_on_selector_all("details.op", "els => els.filter(d => !d.open).length")
    assert closed >= 2, "tool calls collapsed"
    page.fill("#find input", "quokka")
    page.wait_for_selector("#find span:text-is('1 found')")
    assert page.eval_on_selector("details.op.failed", "d => d.open"), "a hit is opened"
    page.fill("#find input", "")
    page.emulate_media(media="print")
    page.evaluate("window.dispatchEvent(new Event('beforeprint'))")
    assert page.eval_on_selector_all("details", "els => els.every(d => d.open)")
    page.emulate_media(color_scheme="dark")
    dark = page.evaluate("getComputedStyle(document.body).backgroundColor")
    page.emulate_media(color_scheme="light")
    light = page.evaluate("getComputedStyle(document.body).backgroundColor")
    assert (dark, light) == ("rgb(13, 17, 23)", "rgb(255, 255, 255)")
    assert [url for url in page.asked if not url.startswith("file://")] == []
    page.close()

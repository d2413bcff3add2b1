"""Prices come from genai-prices: the rates sessiond reads once per model and tier give the
library's own `calc_price` for every call, a model the list does not know is unpriced
(never a neighbour's price), and tiered prices switch where the library switches them."""

from __future__ import annotations

import pytest
from genai_prices import Usage, calc_price
from hypothesis import given, settings
from hypothesis import strategies as st

from restore.agents import pricing

MODELS = [
    ("claude-opus-5-5", "claude-code", "anthropic"),  # Claude Code 2.1's default
    ("claude-opus-4-8", "claude-code", "anthropic"),
    ("claude-sonnet-4-5-20250929", "claude-code", "anthropic"),  # a dated id
    ("claude-haiku-4-5", "claude-code", "anthropic"),
    ("gpt-5.5", "codex", "openai"),  # tiered
    ("gpt-5", "codex", "openai"),
    ("gemini-2.5-pro", "gemini", "google"),  # tiered above 200k prompt tokens
    ("gemini-3.8-flash", "gemini", "google"),
]
DAY = "2026-11-30"


def library(model: str, provider: str, fresh: int, write: int, read: int, out: int) -> float:
    usage = Usage(input_tokens=fresh + write + read, cache_write_tokens=write,
                  cache_read_tokens=read, output_tokens=out)  # fmt: skip
    at = pricing._moment(DAY)
    found = calc_price(usage, model, provider_id=provider, genai_request_timestamp=at)
    return float(found.total_price)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(MODELS),
    st.integers(0, 400_000),
    st.integers(0, 50_000),
    st.integers(0, 300_000),
    st.integers(0, 40_000),
)
def test_every_call_costs_what_the_library_says(
    entry: tuple[str, str, str], fresh: int, write: int, read: int, out: int
) -> None:
    model, _agent, provider = entry
    ours = pricing.usd(model, fresh=fresh, cache_write=write, cache_read=read, output=out,
                       provider=provider, at=f"{DAY}T10:00:00Z")  # fmt: skip
    assert ours == pytest.approx(library(model, provider, fresh, write, read, out), rel=1e-9,
                                 abs=1e-9)  # fmt: skip


@pytest.mark.parametrize("model", ["claude-sonnet-4-5-20250929", "claude-opus-4-8"])
def test_a_cache_write_kept_for_an_hour_costs_what_the_library_says(model: str) -> None:
    """Claude Code's replies split their cache writes by lifetime; an hour's costs twice
    the input price, not the 5-minute write's 1.25x (what ccusage charges too)."""
    at = pricing._moment(DAY)
    for hour in (0, 400, 1000):
        usage = Usage(input_tokens=1400, cache_write_tokens=1000, cache_write_1h_tokens=hour,
                      cache_read_tokens=300, output_tokens=50)  # fmt: skip
        expected = float(calc_price(usage, model, provider_id="anthropic",
                                    genai_request_timestamp=at).total_price)  # fmt: skip
        ours = pricing.usd(model, fresh=100, cache_write=1000, cache_read=300, output=50,
                           cache_write_1h=hour, provider="anthropic", at=DAY)  # fmt: skip
        assert ours == pytest.approx(expected, rel=1e-9)
    five_minutes, hour = (
        pricing.usd(model, fresh=0, cache_write=10**6, cache_read=0, output=0,
                    cache_write_1h=n, provider="anthropic", at=DAY)
        for n in (0, 10**6)
    )  # fmt: skip
    assert five_minutes is not None and hour is not None and hour > five_minutes


@pytest.mark.parametrize("model", ["claude-opus-4-9", "gpt-6.2-sol", "gpt-5.5-2099-01-01",
                                   "", "my-local-model"])  # fmt: skip
def test_a_model_the_list_does_not_know_is_unpriced_not_guessed(model: str) -> None:
    assert pricing.usd(model, fresh=1000, cache_write=0, cache_read=0, output=100,
                       provider="anthropic" if "claude" in model else "openai") is None  # fmt: skip


def test_new_models_get_their_own_price_not_an_older_familys() -> None:
    """The hand-written table priced claude-opus-4-8 as claude-opus-4 (3x) and gpt-5.5 as
    gpt-5."""
    million = {"fresh": 1_000_000, "cache_write": 0, "cache_read": 0, "output": 0}
    assert pricing.usd("claude-opus-4-8", provider="anthropic", **million) == pytest.approx(5.0)
    assert pricing.usd("claude-opus-4", provider="anthropic", **million) == pytest.approx(15.0)
    assert pricing.usd("gpt-5.5", provider="openai", **million) != pricing.usd(
        "gpt-5", provider="openai", **million
    )


def test_a_long_prompt_is_priced_at_the_higher_tier() -> None:
    rates = pricing.rates_of("gemini-2.5-pro", "google", DAY)
    assert rates is not None and rates.thresholds, "gemini-2.5-pro is tiered in the price list"
    start = rates.thresholds[0]
    at_start, above = (
        pricing.usd("gemini-2.5-pro", fresh=n, cache_write=0, cache_read=0, output=0,
                    provider="google", at=DAY)
        for n in (start, start + 1)
    )  # fmt: skip
    assert at_start is not None and above is not None
    assert above / (start + 1) > at_start / start  # the whole call at the higher rate
    assert above == pytest.approx(library("gemini-2.5-pro", "google", start + 1, 0, 0, 0))

"""What a model's tokens cost in USD, for the models whose public price list we know.

Imported sessions record tokens, never money; sessiond prices them with this table and
says so (`priced: false`) when a model is not in it, rather than guessing. Prices are USD
per million tokens from the vendors' published lists (Anthropic, OpenAI), checked
2026-11; a model matches the longest prefix below (dated and suffixed ids included).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Price:
    """USD per million tokens: fresh input, cache writes, cache reads, output."""

    input: float
    cache_write: float
    cache_read: float
    output: float


# Longest prefix wins, so more specific ids come with their own row.
PRICES: dict[str, Price] = {
    # Anthropic: cache writes (5-minute) cost 1.25x input, cache reads 0.1x.
    "claude-opus-4-5": Price(5.0, 6.25, 0.5, 25.0),
    "claude-opus-4-6": Price(5.0, 6.25, 0.5, 25.0),
    "claude-opus-4": Price(15.0, 18.75, 1.5, 75.0),
    "claude-3-opus": Price(15.0, 18.75, 1.5, 75.0),
    "claude-sonnet-4": Price(3.0, 3.75, 0.3, 15.0),
    "claude-3-7-sonnet": Price(3.0, 3.75, 0.3, 15.0),
    "claude-3-5-sonnet": Price(3.0, 3.75, 0.3, 15.0),
    "claude-haiku-4": Price(1.0, 1.25, 0.1, 5.0),
    "claude-3-5-haiku": Price(0.8, 1.0, 0.08, 4.0),
    # OpenAI: cached input is billed at the cached rate; no separate cache-write price.
    "gpt-5-codex": Price(1.25, 1.25, 0.125, 10.0),
    "gpt-5.1-codex-mini": Price(0.25, 0.25, 0.025, 2.0),
    "gpt-5.1-codex": Price(1.25, 1.25, 0.125, 10.0),
    "gpt-5.1": Price(1.25, 1.25, 0.125, 10.0),
    "gpt-5-mini": Price(0.25, 0.25, 0.025, 2.0),
    "gpt-5-nano": Price(0.05, 0.05, 0.005, 0.4),
    "gpt-5": Price(1.25, 1.25, 0.125, 10.0),
    "gpt-4.1-mini": Price(0.4, 0.4, 0.1, 1.6),
    "gpt-4.1": Price(2.0, 2.0, 0.5, 8.0),
    "o4-mini": Price(1.1, 1.1, 0.275, 4.4),
    "o3": Price(2.0, 2.0, 0.5, 8.0),
}
_BY_LENGTH = sorted(PRICES, key=len, reverse=True)


def price_of(model: str) -> Price | None:
    """The price row for `model`, or None when it is not known."""
    for prefix in _BY_LENGTH:
        if model.startswith(prefix):
            return PRICES[prefix]
    return None


def usd(model: str, *, fresh: int, cache_write: int, cache_read: int, output: int) -> float | None:
    """The cost of one call's tokens, or None when the model's price is not known."""
    price = price_of(model)
    if price is None:
        return None
    total = (
        fresh * price.input
        + cache_write * price.cache_write
        + cache_read * price.cache_read
        + output * price.output
    )
    return round(total / 1_000_000, 10)

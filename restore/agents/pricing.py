"""What a model's tokens cost in USD: Pydantic's `genai-prices`, offline.

Why a library: prices change every few weeks, models gain dated and suffixed ids, and some
prices are tiered (a long prompt costs more per token) or split into cache reads and
writes. genai-prices is maintained for exactly this: its data comes from the providers'
own price pages, ships inside the package (nothing is fetched; `pip install -U
genai-prices` brings newer prices), and every model has explicit match rules instead of a
prefix of ours. A model it does not know is tokens only, `priced: false`, never guessed:
`claude-opus-4-8` is not priced as `claude-opus-4`, nor `gpt-5.5` as `gpt-5`.

Speed: the library prices one call in ~60 µs through its unit registry, and an import
prices every model call of every session (hundreds of thousands). So the rates of a model
on a day are read from the library once per price tier and applied here as arithmetic:
within a tier a price is linear in each token count, which is the library's own rule
(`calc_unit_price`: the tier is chosen by the call's total input tokens).
`tests/test_pricing.py` holds `usd` equal to the library's `calc_price`.
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class Rates:
    """USD per token within one tier, and per call."""

    fresh: float
    cache_write: float
    cache_read: float
    output: float
    per_call: float
    cache_write_1h: float = 0.0
    """A cache write kept for an hour (Anthropic's `ephemeral_1h`: twice the input price,
    not the 5-minute write's 1.25x); the 5-minute rate where the list has no other."""


@dataclass(frozen=True)
class ModelRates:
    """A model's rates on one day: one `Rates` per tier of total input tokens."""

    model_id: str
    thresholds: tuple[int, ...]
    """A tier applies above its start (`total input > start`), ascending."""
    tiers: tuple[Rates, ...]
    """`len(thresholds) + 1` entries: the base rates first."""

    def usd(
        self, *, fresh: int, cache_write: int, cache_read: int, output: int, cache_write_1h: int = 0
    ) -> float:
        """`cache_write_1h`: how many of the `cache_write` tokens were written for an hour."""
        tier = self.tiers[bisect.bisect_left(self.thresholds, fresh + cache_write + cache_read)]
        hour = min(max(0, cache_write_1h), cache_write)
        total = (
            fresh * tier.fresh
            + (cache_write - hour) * tier.cache_write
            + hour * tier.cache_write_1h
            + cache_read * tier.cache_read
            + output * tier.output
            + tier.per_call
        )
        return round(total, 10)


def usd(
    model: str,
    *,
    fresh: int,
    cache_write: int,
    cache_read: int,
    output: int,
    provider: str | None = None,
    at: str | None = None,
    cache_write_1h: int = 0,
) -> float | None:
    """The cost of one call's tokens, or None when the price list does not know the model.

    `fresh` is input that was neither read from nor written to a cache; `at` the call's ISO
    timestamp (prices that changed on a date apply from it); `provider` whose price list
    the model is on (an agent's price source: its parser's PROVIDER; None lets the library
    find it); `cache_write_1h` how many of the cache writes were kept for an hour (Claude
    Code's `cache_creation.ephemeral_1h_input_tokens`), priced at their own rate.
    """
    rates = rates_of(model, provider, (at or _today())[:10])
    if rates is None:
        return None
    return rates.usd(
        fresh=fresh,
        cache_write=cache_write,
        cache_read=cache_read,
        output=output,
        cache_write_1h=cache_write_1h,
    )


@functools.lru_cache(maxsize=512)
def rates_of(model: str, provider: str | None, day: str) -> ModelRates | None:
    """The model's rates on `day` (YYYY-MM-DD), read from genai-prices; None when unknown."""
    if not model:
        return None
    from genai_prices import Usage, data_snapshot, types

    try:
        _provider, info = data_snapshot.get_snapshot().find_provider_model(
            model, None, provider, None
        )
        prices = info.get_prices(_moment(day))
    except (LookupError, ValueError):
        return None
    thresholds = sorted(
        {
            tier.start
            for value in vars(prices).values()
            if isinstance(value, types.TieredPrices)
            for tier in value.tiers
        }
    )

    def price(**tokens: int) -> float:
        return float(prices.calc_price(Usage(**tokens))["total_price"])

    per_call = price(input_tokens=0, output_tokens=0)
    tiers = []
    for start in [0, *thresholds]:
        # A total input inside this tier: just above its start (the base: 1M, or the first
        # threshold itself when that is lower, since a tier applies only above its start).
        n = start + 1 if start else min(1_000_000, thresholds[0] if thresholds else 1_000_000)
        n = max(n, 1)
        fresh = price(input_tokens=n)
        write = (price(input_tokens=n, cache_write_tokens=n) - per_call) / n
        try:
            hour = (
                price(input_tokens=n, cache_write_tokens=n, cache_write_1h_tokens=n) - per_call
            ) / n
        except (LookupError, ValueError, TypeError):  # no such price: the 5-minute one
            hour = write
        tiers.append(
            Rates(
                fresh=(fresh - per_call) / n,
                cache_write=write,
                cache_read=(price(input_tokens=n, cache_read_tokens=n) - per_call) / n,
                output=(price(input_tokens=n, output_tokens=n) - fresh) / n,
                per_call=per_call,
                cache_write_1h=hour,
            )
        )
    return ModelRates(info.id, tuple(thresholds), tuple(tiers))


def library_version() -> str:
    """Which genai-prices (and so which price list) priced a session: `sessiond doctor`."""
    from importlib.metadata import version

    return version("genai-prices")


def _moment(day: str) -> datetime:
    try:
        return datetime.fromisoformat(day).replace(tzinfo=UTC, hour=12)
    except ValueError:
        return datetime.now(UTC)


def _today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


def describe(model: str, provider: str | None = None) -> dict[str, Any] | None:
    """A model's base rates per million tokens, for docs and `sessiond doctor`."""
    rates = rates_of(model, provider, _today())
    if rates is None:
        return None
    base = rates.tiers[0]
    return {
        "model": rates.model_id,
        "input": round(base.fresh * 1e6, 6),
        "cacheWrite": round(base.cache_write * 1e6, 6),
        "cacheRead": round(base.cache_read * 1e6, 6),
        "output": round(base.output * 1e6, 6),
        "tiered": bool(rates.thresholds),
    }

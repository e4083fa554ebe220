"""What a step cost, from the config's price table, summed exactly. Pure.

A price is given per million tokens, with at most six decimals (`2.5`, `0.075`,
`0.000125`). Costs are integers in pico-units (10^-12 of the price's currency): one token
at a price of P per million costs P x 10^6 pico-units exactly, so a cost is an integer
product and a sum of costs never drifts, however many steps add up (ADR 0057). Shown with
six decimals.
"""

from __future__ import annotations

from dataclasses import dataclass
from decimal import Decimal

from ..turns import TokenUsage

PICO = 10**12  # pico-units in one unit of the price's currency
MICRO = 10**6  # a price per million tokens, in micro-units: pico-units per token
MAX_COST = 2**63 - 1  # a stored sum saturates here (9.2 million units: far beyond any budget)


def per_token(price_per_mtok: Decimal) -> int:
    """A price per million tokens as pico-units per token (exact: six decimals at most)."""
    scaled = price_per_mtok * MICRO
    if scaled != scaled.to_integral_value():
        raise ValueError(f"{price_per_mtok} has more than six decimals")
    return int(scaled)


def units(amount: Decimal) -> int:
    """An amount of the currency (a budget) in pico-units."""
    return int(amount * PICO)


@dataclass(frozen=True, slots=True)
class Price:
    """Pico-units per token of each kind (0: free, the default)."""

    input: int = 0
    output: int = 0
    cached_input: int = 0
    cache_write: int = 0

    @classmethod
    def per_mtok(
        cls,
        input: Decimal,
        output: Decimal,
        cached_input: Decimal | None = None,
        cache_write: Decimal | None = None,
    ) -> Price:
        """From the config's prices per million tokens; a cache price left out is the
        input price."""
        return cls(
            per_token(input),
            per_token(output),
            per_token(input if cached_input is None else cached_input),
            per_token(input if cache_write is None else cache_write),
        )


FREE = Price()


def cost(tokens: TokenUsage, price: Price) -> int:
    """What a step cost, in pico-units."""
    return (
        tokens.input_tokens * price.input
        + tokens.output_tokens * price.output
        + tokens.cached_input_tokens * price.cached_input
        + tokens.cache_write_tokens * price.cache_write
    )


def saturated(value: int) -> int:
    return min(value, MAX_COST)


def shown(pico: int) -> str:
    """A cost as its currency with six decimals: `0.001234`."""
    return str((Decimal(pico) / PICO).quantize(Decimal("0.000001")))

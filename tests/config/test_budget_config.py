"""`[agents.<a>.budget]` and `[providers.<kind>.<alias>] price` (issue 27): shapes and the
rule that each budget key names outside origins that can reach the agent."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from tests.config.test_rules import only
from zeroclaw.config import validate_document


def test_budgets_and_prices_load(doc: dict[str, Any]) -> None:
    doc["providers"]["offline"]["default"] = {
        "price": {"input_per_mtok": 0.075, "output_per_mtok": "0.3"}
    }
    doc["agents"]["alpha"]["budget"] = {
        "tokens_per_day": 200_000,
        "cost_per_day": 2.5,
        "turns_per_hour": 60,
        "origins": {
            "*": {"turns_per_hour": 10},
            "webhook.ops": {"tokens_per_day": 50_000},
            "webhook.ops:*": {"turns_per_hour": 5},
            "webhook.ops:@CI-Bot": {"turns_per_hour": 30},
            "peer": {"cost_per_day": "0.25"},
            "peer:beta": {"turns_per_hour": 3},
        },
    }
    config = validate_document(doc)
    price = config.providers.offline["default"].price
    assert price is not None and price.input_per_mtok == Decimal("0.075")
    budget = config.agents["alpha"].budget
    assert budget.cost_per_day == Decimal("2.5")
    assert budget.origins["peer"].cost_per_day == Decimal("0.25")


@pytest.mark.parametrize(
    ("key", "words"),
    [
        ("cli.local", "the operator's turns"),
        ("webhook.other", "does not bind channel 'webhook.other'"),  # no such channel
        ("serial.bench", "does not bind channel 'serial.bench'"),
        ("peer:gamma", "unknown agent 'gamma'"),
        ("peer:alpha", "unknown agent 'alpha'"),  # itself
        ("ops", "'<type>.<alias>'"),
        (":*", "names no channel"),
        ("webhook.ops:@", "names no sender"),
    ],
)
def test_a_budget_key_names_origins_that_reach_the_agent(
    doc: dict[str, Any], key: str, words: str
) -> None:
    doc["channels"]["serial"] = {"bench": {"port": "/dev/null"}}
    doc["agents"]["alpha"]["budget"] = {"origins": {key: {"turns_per_hour": 1}}}
    found_key, message = only(doc)
    assert found_key.startswith("agents.alpha.budget.origins.") and key in found_key
    assert words in message


def test_one_sender_spelled_twice_is_named_once(doc: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["budget"] = {
        "origins": {"webhook.ops:ci-bot": {}, "webhook.ops:@CI-BOT": {"turns_per_hour": 1}}
    }
    key, message = only(doc)
    assert key.startswith("agents.alpha.budget.origins.") and "names the same origins" in message


@pytest.mark.parametrize(
    "price",
    [{"input_per_mtok": "0.0000001"}, {"output_per_mtok": -1}, {"input_per_mtok": "NaN"}],
)
def test_a_price_is_a_non_negative_amount_with_six_decimals_at_most(
    doc: dict[str, Any], price: dict[str, Any]
) -> None:
    doc["providers"]["offline"]["default"] = {"price": price}
    key, _ = only(doc)
    assert key.startswith("providers.offline.default.price.")


@pytest.mark.parametrize(
    "limit", [{"tokens_per_day": 0}, {"turns_per_hour": -1}, {"cost_per_day": -1}]
)
def test_a_limit_is_positive(doc: dict[str, Any], limit: dict[str, Any]) -> None:
    doc["agents"]["alpha"]["budget"] = limit
    key, _ = only(doc)
    assert key.startswith("agents.alpha.budget.")

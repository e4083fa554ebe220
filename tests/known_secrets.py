"""Every secret the end-to-end tests give a daemon, in one place, and the check that none of
them reached a log (issue 14: a debug log says a lot, never a key).

Tests that start a daemon with a provider key, a webhook signing secret or any other secret
take its value from here; the `daemons` fixture greps each daemon's log for all of them
when the test ends. The values are long and odd so that no innocent line contains one.
"""

from __future__ import annotations

from pathlib import Path

PROVIDER_KEY = "sk-zc-test-provider-key-7c41e9"  # a provider's api_key_env value
OPENAI_KEY = "sk-zc-test-openai-key-2b8d05"  # the fake OpenAI-compatible server's key
HOOK_SECRET = "zc-test-webhook-signing-secret-9a3f"  # a webhook channel's secret_env value
UNBOUND_SECRET = "zc-test-secret-bound-to-nobody-51d2"  # in the daemon's env, for no agent
METRICS_TOKEN = "zc-test-metrics-bearer-token-e60b"  # the metrics_token_env value
MCP_HEADER = "Bearer zc-test-mcp-header-value-3e7a"  # an HTTP MCP server's headers_env value
API_TOKEN = "zc-test-gateway-api-token-4f19"  # a gateway token's token_env value
OTHER_API_TOKEN = "zc-test-gateway-other-token-8d27"  # a second gateway token
OPERATOR_TOKEN = "zc-test-gateway-operator-token-c3a6"  # the gateway's operator_token_env
ADAPTER_KEY = "zc-test-http-adapter-key-8f1c60"  # an HTTP adapter's api_key_env value
TELEGRAM_TOKEN = "424242:zc-test-telegram-bot-token-b7e2"  # a Telegram bot's token_env value
TELEGRAM_HOOK_TOKEN = "434343:zc-test-telegram-hook-token-5a1c"  # a webhook-mode bot's
MATRIX_PASSWORD = "zc-test-matrix-password-4d9e17"  # the Matrix channel's password_env value

TEST_SECRETS = (
    PROVIDER_KEY,
    OPENAI_KEY,
    HOOK_SECRET,
    UNBOUND_SECRET,
    METRICS_TOKEN,
    MCP_HEADER,
    API_TOKEN,
    OTHER_API_TOKEN,
    OPERATOR_TOKEN,
    ADAPTER_KEY,
    TELEGRAM_TOKEN,
    TELEGRAM_HOOK_TOKEN,
    MATRIX_PASSWORD,
)


def secrets_in(text: str, secrets: tuple[str, ...] = TEST_SECRETS) -> list[str]:
    """The known secrets that appear in `text`."""
    return [secret for secret in secrets if secret in text]


def assert_no_secret_logged(log: Path, secrets: tuple[str, ...] = TEST_SECRETS) -> None:
    """Fail, naming the secret and the line, if the log holds any known secret."""
    try:
        text = log.read_text(errors="replace")
    except FileNotFoundError:
        return
    found = secrets_in(text, secrets)
    if found:
        lines = [line for line in text.splitlines() if any(s in line for s in found)]
        raise AssertionError(f"{log} holds test secrets {found}: {lines[:3]}")

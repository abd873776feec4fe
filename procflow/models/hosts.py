"""Where hosted providers live: their names, API roots and environment variables.

The providers that speak OpenAI's chat completions (``OPENAI_COMPATIBLE``) share
``OpenAIChatModel``; a model string ``"<host>/<model-id>"`` names one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = ["OPENAI_COMPATIBLE", "Host"]


@dataclass(frozen=True, slots=True)
class Host:
    """A provider's API: where it is and which environment variables configure it.

    Attributes:
        name: The provider's name (the model string's prefix, e.g. "groq").
        base_url: The default API root.
        key_env: The variable holding the API key; ``None`` when the API needs no key
            (a key given as ``api_key=`` is still sent).
        url_env: The variable overriding ``base_url``.
        stream_usage: Whether to ask for usage in the stream (``stream_options``);
            ``False`` for hosts that send it unasked and refuse the option.
    """

    name: str
    base_url: str
    key_env: str | None
    url_env: str
    stream_usage: bool = True


def _host(name: str, base_url: str, *, keyless: bool = False,
          stream_usage: bool = True) -> Host:
    prefix = name.upper()
    return Host(name, base_url, None if keyless else f"{prefix}_API_KEY", f"{prefix}_BASE_URL",
                stream_usage)


OPENAI_COMPATIBLE: Final[dict[str, Host]] = {host.name: host for host in (
    _host("openai", "https://api.openai.com/v1"),
    _host("ollama", "http://127.0.0.1:11434/v1", keyless=True),
    _host("groq", "https://api.groq.com/openai/v1"),
    _host("mistral", "https://api.mistral.ai/v1", stream_usage=False),
    _host("openrouter", "https://openrouter.ai/api/v1"),
    _host("together", "https://api.together.xyz/v1"),
    _host("deepseek", "https://api.deepseek.com/v1"),
    _host("fireworks", "https://api.fireworks.ai/inference/v1"),
    _host("xai", "https://api.x.ai/v1"),
    _host("cerebras", "https://api.cerebras.ai/v1"),
)}
"""The hosts ``OpenAIChatModel`` talks to by name: base URL, key and URL variables
(``<NAME>_API_KEY``, ``<NAME>_BASE_URL``)."""

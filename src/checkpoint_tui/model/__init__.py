"""Model providers (OpenAI-compatible over httpx, offline), decision parsing and the guardrail."""

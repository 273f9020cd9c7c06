"""The backends (backend/): transformers, vLLM (backend and plugin pieces), the remote OpenAI-compatible backend."""

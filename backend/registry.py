"""Backends are chosen by configuration: ``settings.backend`` names one; imports stay lazy so the
keystroke path and the CLI never import torch/vllm/httpx for a backend that is not used."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .contract import Backend, BackendUnavailable

if TYPE_CHECKING:
    from dgemma_lsp.config import Settings


def create_backend(settings: Settings) -> Backend:
    name = settings.backend
    if name == "transformers":
        from .transformers_backend import TransformersBackend

        return TransformersBackend.from_settings(settings)
    if name == "openai":
        from .openai_backend import OpenAIBackend

        return OpenAIBackend.from_settings(settings)
    if name == "vllm":
        try:
            from .vllm_backend import VLLMBackend
        except ImportError as exc:  # vllm not installed
            raise BackendUnavailable(
                f"the vllm backend needs vLLM on a CUDA machine: pip install 'dgemma-lsp[vllm]' ({exc})"
            ) from None
        return VLLMBackend.from_settings(settings)
    raise BackendUnavailable(f"unknown backend {name!r}")

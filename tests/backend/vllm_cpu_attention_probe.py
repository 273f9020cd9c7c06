"""Run under vLLM's CPU build (``$DGEMMA_VLLM_PYTHON``) by tests/backend/test_vllm_attention_cpu.py: the plugin's
``attention`` piece against vLLM's real classes. Prints one JSON line.

What the real registry resolves ``TRITON_ATTN`` to after ``register()`` (vLLM's own) and after ``activate()``, our implementation built through vLLM's real
``TritonAttentionImpl.__init__`` (the attributes our ``forward`` reads, as that ``__init__`` set them), the two
signatures, and where ``is_quantized_kv_cache`` came from: from ``vllm.v1.kv_cache_interface``, and, with that name
taken out of the module (a vLLM that keeps it in ``vllm.utils.torch_utils`` only), from the fallback.
"""

from __future__ import annotations

import importlib
import inspect
import json
import sys


def main() -> dict:
    import vllm
    import vllm.utils.torch_utils as tu
    import vllm.v1.kv_cache_interface as kvi
    from vllm.v1.attention.backend import AttentionType
    from vllm.v1.attention.backends.registry import AttentionBackendEnum
    from vllm.v1.attention.backends.triton_attn import TritonAttentionBackend, TritonAttentionImpl

    from dgemma_lsp.backend import vllm_plugin

    before = AttentionBackendEnum.TRITON_ATTN.get_path()
    vllm_plugin.register()
    registered = AttentionBackendEnum.TRITON_ATTN.get_path()  # register() alone leaves it to vLLM
    vllm_plugin.activate()  # what our DiffusionGemma classes call before their layers
    backend = AttentionBackendEnum.TRITON_ATTN.get_class()
    from dgemma_lsp.backend import vllm_attention_backend as ab

    impl_cls = backend.get_impl_cls()
    layers = {}
    for name, kw in {
        "full": {"head_size": 512, "sliding_window": None, "sinks": None},
        "sliding": {"head_size": 256, "sliding_window": 1024, "sinks": None},
    }.items():
        impl = impl_cls(num_heads=8, num_kv_heads=2, scale=kw["head_size"] ** -0.5, alibi_slopes=None,
                        kv_cache_dtype="auto", logits_soft_cap=None, attn_type=AttentionType.DECODER,
                        kv_sharing_target_layer_name=None, **kw)  # fmt: skip
        layers[name] = {
            "sliding_window": list(impl.sliding_window),
            # what our __init__ chose from vLLM's attributes: no tiles for a CPU, no FA3 off Hopper
            "ours": {"tiles": impl._tiles, "fa3": impl._fa3, "wide": impl._wide},
            "missing": sorted(
                a
                for a in (
                    "sinks",
                    "sliding_window",
                    "logits_soft_cap",
                    "_is_per_token_head_quant",
                    "use_td",
                    "alibi_slopes",
                    "chunk_lookback",
                    "kv_cache_dtype",
                    "attn_type",
                    "head_size",
                    "scale",
                )
                if not hasattr(impl, a)
            ),  # fmt: skip
        }

    def params(f) -> list[str]:
        return list(inspect.signature(f).parameters)

    first = ab.is_quantized_kv_cache
    kept = kvi.is_quantized_kv_cache
    del kvi.is_quantized_kv_cache
    try:
        del sys.modules[ab.__name__]
        fallback = importlib.import_module(ab.__name__).is_quantized_kv_cache
    finally:
        kvi.is_quantized_kv_cache = kept
    return {
        "version": vllm.__version__,
        "features": sorted(vllm_plugin.active_features()),
        "before": before,
        "after_register": registered,
        "after": AttentionBackendEnum.TRITON_ATTN.get_path(),
        "backend_subclass": issubclass(backend, TritonAttentionBackend),
        "impl": f"{impl_cls.__module__}.{impl_cls.__qualname__}",
        "impl_subclass": issubclass(impl_cls, TritonAttentionImpl),
        "forward_params": params(impl_cls.forward) == params(TritonAttentionImpl.forward),
        "layers": layers,
        "first_from_kv_cache_interface": first is kept,
        "fallback_from_torch_utils": fallback is tu.is_quantized_kv_cache and fallback("fp8") is True,
    }


if __name__ == "__main__":
    print(json.dumps(main()))

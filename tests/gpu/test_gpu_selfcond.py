"""The ``sc_batch`` piece on the GPU: one self-conditioning MLP call over four canvases gives the rows of vLLM's own
per-request loop, with vLLM's module at the 26B's size (hidden 2816, 2112 wide), bf16."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from dgemma_lsp.backend.vllm_selfcond import apply_batched, overridable

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU: run tests/gpu/run_device.sh"),
]

HIDDEN, SC, CANVAS, SLOTS = 2816, 2112, 256, 6


@pytest.mark.parametrize("slots", [[0, 1, 2, 3], [3, 1, 5, 2]])
def test_one_call_gives_vllms_per_request_rows(slots: list[int]) -> None:
    pytest.importorskip("vllm", reason="needs vLLM (the device kit): run tests/gpu/run_device.sh")
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.model_executor.models import diffusion_gemma as dg
    from vllm.utils.torch_utils import async_tensor_h2d  # in 0.26 and 0.33 alike

    assert overridable(dg.DiffusionGemmaModelState), "the piece would be off on this vLLM"
    torch.manual_seed(0)
    with set_current_vllm_config(VllmConfig()), torch.inference_mode():
        mlp = dg.DiffusionGemmaSelfConditioning(HIDDEN, SC).to("cuda", torch.bfloat16)
        for w in (mlp.gate_proj.weight, mlp.up_proj.weight, mlp.down_proj.weight):
            w.normal_(0.0, 0.02)
        mlp.pre_norm.weight.normal_(1.0, 0.1)
        n = len(slots)
        qsl = np.array([0, 5, *(5 + CANVAS * (i + 1) for i in range(n))], dtype=np.int32)  # a prefill chunk first
        decode = np.arange(1, n + 1, dtype=np.int64)
        slots_np = np.array(slots, dtype=np.int64)
        inputs = torch.randn(int(qsl[-1]) + 16, HIDDEN, device="cuda", dtype=torch.bfloat16)
        sc = torch.randn(SLOTS, CANVAS, HIDDEN, device="cuda", dtype=torch.float32) * 0.05
        want = inputs.clone()
        # vLLM's own loop, unbound, on a stand-in holding the module (the method reads only self.model)
        dg.DiffusionGemmaModelState._apply_self_conditioning(
            SimpleNamespace(model=SimpleNamespace(self_conditioning=mlp)), slots_np, decode, qsl, want, sc
        )
        got = inputs.clone()
        to_gpu = lambda a: async_tensor_h2d(a, device=got.device)  # noqa: E731
        assert apply_batched(mlp, slots_np, decode, qsl, got, sc, to_gpu)
    torch.testing.assert_close(got, want, rtol=2e-2, atol=2e-2)
    assert torch.equal(got[:5], inputs[:5]) and torch.equal(got[int(qsl[-1]) :], inputs[int(qsl[-1]) :])

"""The ``sc_batch`` piece's own parts: when the canvases' rows lie back to back, and one MLP call over them gives
the rows vLLM's per-request loop gives (a small row-wise gated MLP stands in for the model's; vLLM's own module at
the 26B's size runs in tests/gpu/test_gpu_selfcond.py)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from dgemma_lsp.backend.vllm_plugin import SAMPLER_FEATURES, active_features, enabled_features
from dgemma_lsp.backend.vllm_selfcond import SC_PARAMS, apply_batched, decode_span, overridable, per_request

H, INNER = 16, 24


def _mlp(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    wg, wu = torch.randn(INNER, H, generator=g) * 0.3, torch.randn(INNER, H, generator=g) * 0.3
    wd = torch.randn(H, INNER, generator=g) * 0.3

    def norm(x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)

    def mlp(inputs: torch.Tensor, soft: torch.Tensor) -> torch.Tensor:
        x = norm(soft)
        return norm(inputs + (torch.nn.functional.gelu(x @ wg.T, approximate="tanh") * (x @ wu.T)) @ wd.T)

    return mlp


def _batch(qsl: list[int], slots: list[int], decode: list[int], n_slots: int = 6, canvas: int = 8):
    g = torch.Generator().manual_seed(1)
    return (
        np.array(slots, dtype=np.int64),
        np.array(decode, dtype=np.int64),
        np.array(qsl, dtype=np.int32),
        torch.randn(qsl[-1] + 3, H, generator=g),  # 3 padding rows past the batch
        torch.randn(n_slots, canvas, H, generator=g),
    )


@pytest.mark.parametrize(
    "qsl,decode,want",
    [
        ([0, 8, 16, 24], [0, 1, 2], (0, 24, 8)),  # three canvases back to back
        ([0, 5, 13, 21], [1, 2], (5, 21, 8)),  # a prefill chunk first, then two canvases
        ([0, 8, 13, 21], [0, 2], None),  # a prefill chunk between two canvases
        ([0, 8, 14], [0, 1], None),  # the last canvas truncated (near max_model_len)
        ([0, 8], [], None),
    ],
)
def test_decode_span(qsl: list[int], decode: list[int], want) -> None:
    assert decode_span(np.array(decode, dtype=np.int64), np.array(qsl, dtype=np.int32)) == want


@pytest.mark.parametrize("slots", [[2, 3, 4], [5, 0, 3]])  # consecutive slots (a view), any others (a gather)
def test_one_call_gives_the_per_request_rows(slots: list[int]) -> None:
    mlp = _mlp()
    qsl, decode = [0, 8, 16, 24], [0, 1, 2]
    s, d, q, x, sc = _batch(qsl, slots, decode)
    want = x.clone()
    per_request(mlp, s, d, q, want, sc)
    gathered: list[np.ndarray] = []

    def to_device(a: np.ndarray) -> torch.Tensor:
        gathered.append(a)
        return torch.from_numpy(a)

    assert apply_batched(mlp, s, d, q, x, sc, to_device)
    torch.testing.assert_close(x, want, rtol=1e-5, atol=1e-6)
    assert not torch.equal(x[:24], _batch(qsl, slots, decode)[3][:24])  # the rows did change
    assert torch.equal(x[24:], _batch(qsl, slots, decode)[3][24:])  # padding rows untouched
    assert (len(gathered) == 0) == (slots == [2, 3, 4])


def test_rows_not_back_to_back_are_left_to_the_loop() -> None:
    s, d, q, x, sc = _batch([0, 8, 13, 21], [1, 4], [0, 2])
    before = x.clone()
    assert not apply_batched(_mlp(), s, d, q, x, sc, torch.from_numpy)
    assert torch.equal(x, before)


def test_the_override_needs_vllms_method_and_parameters() -> None:
    class Same:
        def _apply_self_conditioning(
            self, decode_slots_np, decode_idx_np, query_start_loc_np, inputs_embeds, sc_embeds
        ):
            pass

    class Renamed:
        def _apply_self_conditioning(self, slots, idx, qsl, inputs_embeds, sc_embeds):
            pass

    assert SC_PARAMS == ("decode_slots_np", "decode_idx_np", "query_start_loc_np", "inputs_embeds", "sc_embeds")
    assert overridable(Same) and not overridable(Renamed) and not overridable(object)


def test_sc_batch_is_on_and_lives_in_the_sampler_classes() -> None:
    # H200, batch 4: 19.02 -> 18.72 ms a step
    assert "sc_batch" in SAMPLER_FEATURES and "sc_batch" in enabled_features({})
    assert "sc_batch" not in active_features(True, {})  # vLLM >= 0.32: its own model state serves
    assert not enabled_features({"DGEMMA_VLLM_PLUGIN": "0"})

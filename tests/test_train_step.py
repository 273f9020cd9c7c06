"""The small model's training step (issue 8): the dense experts forward and the compiled step compute what the
eager step with transformers' own experts forward computes, so a faster GPU run trains the same objective."""

from __future__ import annotations

import random
import types

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from dgemma_lsp.backend.train import train as T  # noqa: E402
from dgemma_lsp.backend.train.experts import NAME, use_dense_experts  # noqa: E402

VOCAB = 4096


def _model():
    torch.manual_seed(0)
    return transformers.DiffusionGemmaForBlockDiffusion(T.make_config(VOCAB, "smoke")).train()


def _batch(rng: random.Random, B: int, L: int, C: int, seeded: bool = False):
    items = []
    for _ in range(B):
        reply = [rng.randrange(7, VOCAB) for _ in range(rng.randrange(3, C + 8))] + [6, 1]
        seed = [rng.randrange(7, VOCAB) for _ in range(C)] if seeded else None
        prompt = [2] + [rng.randrange(7, VOCAB) for _ in range(rng.randrange(L // 2, L))]
        items.append((prompt, reply, "repair" if seeded else "single", C, seed))
    tb = T.to_tensors(T.build_batch(items, C, rng, eos=1), "cpu", 1024)
    nz = T.draw_noise(
        tb, torch.Generator().manual_seed(B * L), VOCAB, ar_frac=0.5, host_gen=torch.Generator().manual_seed(C)
    )
    return tb, nz


def _loss_and_grads(model, core, tb, nz):
    model.zero_grad(set_to_none=True)
    loss, stats = core(tb, nz)
    loss.backward()
    grads = [p.grad.clone() if p.grad is not None else torch.zeros_like(p) for p in model.parameters()]
    return float(loss), grads, {k: float(v) for k, v in stats.items()}


def _max_diff(ga, gb) -> float:
    return max(float((a - b).abs().max()) for a, b in zip(ga, gb, strict=True))


def test_dense_experts_match_transformers_experts() -> None:
    model = _model()
    a = types.SimpleNamespace(sc_prob=0.5, ar_weight=0.25, fill_weight=0.5, compile=False)
    core = T.make_step_core(model, a, eos_id=1, amp=False)
    tb, nz = _batch(random.Random(0), 3, 60, 16, seeded=True)
    default = _loss_and_grads(model, core, tb, nz)
    use_dense_experts(model)
    experts = [m for m in model.modules() if hasattr(m, "gate_up_proj")]
    assert experts and all(m.config._experts_implementation == NAME for m in experts)
    dense = _loss_and_grads(model, core, tb, nz)
    assert default[0] == pytest.approx(dense[0], abs=1e-5)
    assert _max_diff(default[1], dense[1]) < 1e-5
    use_dense_experts(model, False)  # back to what transformers picked
    assert all(m.config._experts_implementation != NAME for m in experts)
    assert _loss_and_grads(model, core, tb, nz)[0] == pytest.approx(default[0], abs=1e-6)


def test_compiled_step_matches_eager_across_shapes() -> None:
    """Graph capture (dynamo + AOTAutograd, dynamic shapes) of the whole step: same loss, gradients and statistics
    as eager over batches of different size, prompt length and canvas width, with no fallback to eager. (The
    Inductor code generation itself runs on the GPU, where the training log records it.)"""
    model = _model()
    use_dense_experts(model)
    base = dict(sc_prob=0.5, ar_weight=0.25, fill_weight=0.5)
    eager = T.make_step_core(model, types.SimpleNamespace(**base, compile=False), eos_id=1, amp=False)
    compiled = T.make_step_core(
        model, types.SimpleNamespace(**base, compile=True, compile_backend="aot_eager"), eos_id=1, amp=False
    )
    rng = random.Random(1)
    for B, L, C, seeded in ((3, 40, 16, False), (5, 70, 32, True), (2, 90, 64, False)):
        tb, nz = _batch(rng, B, L, C, seeded)
        want = _loss_and_grads(model, eager, tb, nz)
        got = _loss_and_grads(model, compiled, tb, nz)
        assert compiled.failure is None
        assert got[0] == pytest.approx(want[0], abs=1e-5)
        assert _max_diff(got[1], want[1]) < 1e-4
        assert got[2] == pytest.approx(want[2], abs=1e-5)

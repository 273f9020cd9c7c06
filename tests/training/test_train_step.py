"""The small model's training step (issue 8): the dense experts forward and the CUDA-graph step's plumbing compute what
the eager step with transformers' own experts forward computes, so a faster GPU run trains the same objective."""

from __future__ import annotations

import random
import types

import pytest
import torch
import transformers

from training import train as T
from training.experts import NAME, use_dense_experts

VOCAB = 4096


def _model():
    torch.manual_seed(0)
    return transformers.DiffusionGemmaForBlockDiffusion(T.make_config(VOCAB, "smoke")).train()


def _batch(rng: random.Random, B: int, L: int, C: int, seeded: bool = False, bucket: bool = False):
    items = []
    for _ in range(B):
        reply = [rng.randrange(7, VOCAB) for _ in range(rng.randrange(3, C + 8))] + [6, 1]
        seed = [rng.randrange(7, VOCAB) for _ in range(C)] if seeded else None
        prompt = [2] + [rng.randrange(7, VOCAB) for _ in range(rng.randrange(L // 2, L))]
        items.append((prompt, reply, "repair" if seeded else "single", C, seed))
    batch = T.build_batch(items, C, rng, eos=1)
    length = T.bucket_shape(max(map(len, batch["prompts"])), C, 10**6, B)[1] if bucket else None
    tb = T.to_tensors(batch, "cpu", 1024, length=length)
    nz = T.draw_noise(
        tb,
        torch.Generator().manual_seed(B * L),
        VOCAB,
        ar_frac=0.5,
        host_gen=torch.Generator().manual_seed(C),
        ar_count=B * 50 if bucket else None,
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
    a = types.SimpleNamespace(sc_prob=0.5, ar_weight=0.25, fill_weight=0.5)
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


def test_bucket_shapes_keep_the_servers_canvas_widths() -> None:
    assert T.bucket_shape(100, 32, 64_000, 384) == (250, 192, 32)  # 64000 // (192 + 2 x 32)
    assert T.bucket_shape(100, 32, 64_000, 100)[0] == 100  # --max-batch
    B, L, C = T.bucket_shape(700, 128, 64_000, 384)
    assert (L, C) == (768, 128) and B == 64_000 // (768 + 256)
    assert T.bucket_shape(5000, 64, 64_000, 384)[1] == T.MAX_PROMPT  # over-long prompts are cut to the window
    assert [T.bucket_shape(300, w, 64_000, 384)[2] for w in (20, 33, 100, 129, 200, 256)] == [
        32,
        64,
        128,
        192,
        256,
        256,
    ]


def test_graph_step_inputs_and_gradients_match_eager() -> None:
    """The CUDA-graph step's plumbing (static inputs per shape bucket, gradients added into persistent .grad
    tensors) run without capture: same statistics and gradients as the eager step, batch after batch."""
    model = _model()
    use_dense_experts(model)
    a = types.SimpleNamespace(sc_prob=0.5, ar_weight=0.25, fill_weight=0.5)
    core = T.make_step_core(model, a, eos_id=1, amp=False)
    graphed = T.GraphedStep(model, core, capture=False)
    rng = random.Random(2)
    batches = [
        _batch(rng, 3, 40, 32, bucket=True),
        _batch(rng, 4, 90, 64, True, True),
        _batch(rng, 3, 40, 32, bucket=True),
    ]
    for tb, nz in batches:
        model.zero_grad(set_to_none=True)
        loss, want_stats = core(tb, nz)
        loss.backward()
        want = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        model.zero_grad(set_to_none=False)
        got_stats = graphed(tb, nz)
        got = [p.grad.clone() for p in model.parameters() if p.grad is not None]
        assert _max_diff(got, want) < 1e-6
        assert {k: float(v) for k, v in got_stats.items()} == pytest.approx(
            {k: float(v) for k, v in want_stats.items()}
        )
    assert len(graphed.graphs) == 2 and graphed.failure is None


def test_a_second_run_takes_up_the_first_runs_decay() -> None:
    # two 8.6-minute runs on one 17.2-minute cosine (v7's and v9's recipe): no restart at the peak
    span, half = 17.2 * 60, 8.6 * 60
    end_of_first = T.learning_rate(2e-3, 4000, 100, half, span)
    second_after_warmup = T.learning_rate(2e-3, 50, 50, 0.0, span, offset_s=half)
    assert second_after_warmup == pytest.approx(end_of_first)
    assert end_of_first == pytest.approx(2e-3 * (0.05 + 0.95 * 0.5))
    assert T.learning_rate(2e-3, 0, 50, 0.0, span, offset_s=half) < end_of_first / 10  # re-warms first
    assert T.learning_rate(2e-3, 4000, 100, half, span, offset_s=half) == pytest.approx(1e-4)  # 5 % at the end
    # one run alone: the decay follows its own budget
    assert T.learning_rate(2e-3, 4000, 100, half, half) == pytest.approx(1e-4)


def test_fast_layers_match_transformers_layers() -> None:
    """The training-only router (gather) and RMS norm (fused ``torch.rms_norm``) forwards: same loss and gradients
    as transformers' own forwards, and switching back restores them."""
    from training.experts import use_fast_layers

    model = _model()
    use_dense_experts(model)
    with torch.no_grad():  # scales and norm weights start at 1: make a wrong pick or a dropped weight visible
        for p in model.parameters():
            if p.ndim == 1:
                p.uniform_(0.5, 1.5)
    a = types.SimpleNamespace(sc_prob=0.5, ar_weight=0.25, fill_weight=0.5)
    core = T.make_step_core(model, a, eos_id=1, amp=False)
    tb, nz = _batch(random.Random(3), 3, 60, 16, seeded=True)
    reference = _loss_and_grads(model, core, tb, nz)
    n = use_fast_layers(model)
    routers = [m for m in model.modules() if type(m).__name__ == "DiffusionGemmaTextRouter"]
    assert routers and n > len(routers) and all("forward" in m.__dict__ for m in routers)
    fast = _loss_and_grads(model, core, tb, nz)
    assert fast[0] == pytest.approx(reference[0], abs=1e-5)
    assert _max_diff(fast[1], reference[1]) < 1e-5
    # the router's per-expert scale gets a gradient either way (the index_put it replaces)
    scale_grads = [p.grad for n_, p in model.named_parameters() if n_.endswith("per_expert_scale")]
    assert scale_grads and any(float(g.abs().sum()) > 0 for g in scale_grads)
    assert use_fast_layers(model, False) == n
    assert not any("forward" in m.__dict__ for m in routers)
    assert _loss_and_grads(model, core, tb, nz)[0] == pytest.approx(reference[0], abs=1e-6)

"""Triton denoising kernels vs the PyTorch reference, in Triton's CPU interpreter (fresh random inputs each run)."""

from __future__ import annotations

from tests.support.interpreter_mode import enter_interpreter_mode, rerun_if_late

# before triton is imported (see tests/support/interpreter_mode.py)
_LATE = enter_interpreter_mode()

import pytest  # noqa: E402
import torch  # noqa: E402

from dgemma_lsp.backend.kernels import denoise_step, denoise_step_reference, linear_temperature  # noqa: E402

SHAPES = [  # (requests, canvas, vocab): vocab not a power of two, ragged last block, one-row canvases
    (1, 16, 1000),
    (2, 8, 517),
    (3, 5, 4096),
    (1, 1, 3),
    (2, 32, 2053),
]
ACCEPT_SHAPES = [(1, 16, 1000), (2, 8, 517), (1, 1, 3), (3, 24, 130)]  # fewer: the interpreter is slow


def _inputs(b: int, c: int, v: int, dtype: torch.dtype = torch.float32, pins: bool = True):
    torch.manual_seed(b * 100_000 + c * 10_000 + v)  # each shape its own inputs, the same on every run
    n = b * c
    logits = (torch.randn(b, c, v) * torch.rand(b, c, 1) * 6).to(dtype)
    noise = torch.rand(n, v).clamp_(1e-7, 1 - 1e-7)
    temp = torch.rand(n) + 0.2
    renoise = torch.randint(0, v, (n,))
    pinned = (torch.rand(n) < 0.25) if pins else None
    pinned_tokens = torch.randint(0, v, (n,)) if pins else None
    return logits, noise, temp, renoise, pinned, pinned_tokens


def _both(*args, **kw):
    out_k = denoise_step(*args, impl="triton", **kw)
    out_r = denoise_step(*args, impl="torch", **kw)
    return out_k, out_r


@pytest.mark.parametrize("b,c,v", SHAPES)
def test_row_stats_match_reference(b: int, c: int, v: int) -> None:
    logits, noise, temp, renoise, pinned, ptok = _inputs(b, c, v)
    k, r = _both(
        logits,
        temp,
        renoise_tokens=renoise,
        noise=noise,
        entropy_bound=0.3,
        pinned=pinned,
        pinned_tokens=ptok,
        scaled_dtype=torch.float32,
    )
    assert torch.equal(k.argmax, r.argmax)  # draft tokens: identical
    assert torch.equal(k.sample, r.sample)  # same noise, same Gumbel-max sample
    torch.testing.assert_close(k.entropy, r.entropy, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(k.scaled_logits, r.scaled_logits, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("splits", [2, 5, None])
def test_vocabulary_split_across_programs_gives_the_same_results(splits: int | None) -> None:
    """Few rows: each row's vocabulary is cut across programs and merged; identical tokens, same entropies."""
    logits, noise, temp, renoise, pinned, ptok = _inputs(1, 3, 5003)
    kw = dict(renoise_tokens=renoise, noise=noise, pinned=pinned, pinned_tokens=ptok, probs_dtype=torch.float32)
    one = denoise_step(logits, temp, impl="triton", splits=1, block_v=512, **kw)
    many = denoise_step(logits, temp, impl="triton", splits=splits, block_v=512, **kw)
    ref = denoise_step(logits, temp, impl="torch", **kw)
    assert torch.equal(many.argmax, one.argmax) and torch.equal(many.sample, one.sample)
    assert torch.equal(many.argmax, ref.argmax) and torch.equal(many.sample, ref.sample)
    torch.testing.assert_close(many.entropy, ref.entropy, rtol=1e-4, atol=1e-5)
    # fp32 sums over the vocabulary in another order (per program, then merged): ~1e-5 relative apart (seen 1.2e-5)
    torch.testing.assert_close(many.probs, ref.probs, rtol=1e-4, atol=1e-7)


@pytest.mark.parametrize("b,c,v", ACCEPT_SHAPES)
@pytest.mark.parametrize("bound", [1e-3, 0.1, 2.0, 1e9])
def test_acceptance_and_next_canvas_match_reference(b: int, c: int, v: int, bound: float) -> None:
    logits, noise, temp, renoise, pinned, ptok = _inputs(b, c, v)
    k, r = _both(
        logits, temp, renoise_tokens=renoise, noise=noise, entropy_bound=bound, pinned=pinned, pinned_tokens=ptok
    )
    # The kernel sums the entropies ahead of a row in another order than cumsum: only rows whose prefix lies
    # within float rounding of the bound may differ.
    diff = k.accepted != r.accepted
    if diff.any():
        e = torch.where(pinned, 0.0, r.entropy)
        for i in diff.nonzero().flatten().tolist():
            seg = i // c
            lo = seg * c
            rows = e[lo : lo + c]
            me = e[i]
            ahead = rows[(rows < me) | ((rows == me) & (torch.arange(lo, lo + c) < i))].sum()
            assert abs(float(ahead) - bound) < 1e-4, (i, float(ahead), bound)
    else:
        assert torch.equal(k.next_canvas, r.next_canvas)
        assert torch.equal(k.argmax, r.argmax)


def test_pinned_tokens_never_change_and_are_always_accepted() -> None:
    logits, noise, temp, renoise, pinned, ptok = _inputs(2, 32, 777)
    k = denoise_step(
        logits,
        temp,
        renoise_tokens=renoise,
        noise=noise,
        entropy_bound=1e-6,
        pinned=pinned,
        pinned_tokens=ptok,
        impl="triton",
    )
    assert torch.equal(k.next_canvas[pinned], ptok[pinned])
    assert torch.equal(k.argmax[pinned], ptok[pinned])
    assert bool(k.accepted[pinned].all())


def test_acceptance_is_the_low_entropy_prefix_within_the_bound() -> None:
    """With a tiny bound, exactly one token per request is accepted (the first one costs nothing)."""
    logits, noise, temp, renoise, _, _ = _inputs(3, 16, 300, pins=False)
    # no near-one-hot rows: a token with entropy below the bound would legitimately let a second one in
    logits, temp = torch.randn(3, 16, 300), torch.ones(48)
    k = denoise_step(logits, temp, renoise_tokens=renoise, noise=noise, entropy_bound=1e-9, impl="triton")
    acc = k.accepted.view(3, 16)
    assert acc.sum(dim=1).tolist() == [1, 1, 1]
    assert torch.equal(acc.float().argmax(dim=1), k.entropy.view(3, 16).argmin(dim=1))
    rest = ~k.accepted
    assert torch.equal(k.next_canvas[rest], renoise[rest])  # renoised where not accepted


def test_bfloat16_logits_and_softcap() -> None:
    logits, noise, temp, renoise, pinned, ptok = _inputs(2, 8, 1531, dtype=torch.bfloat16)
    k, r = _both(
        logits * 40,
        temp,
        renoise_tokens=renoise,
        noise=noise,
        softcap=30.0,
        pinned=pinned,
        pinned_tokens=ptok,
        scaled_dtype=torch.bfloat16,
    )
    # logits x 40 under a cap of 30 saturate: tanh rounds many of them to exactly 1 in fp32, and where the kernel's
    # tanh (through exp2) and torch's round one ulp apart the first maximum moves among equals. The argmax must be a
    # maximum of the capped logits (within that rounding), and is the reference's wherever the maximum is unique.
    # (The argmax of a pinned row is its pinned token.)
    capped = torch.tanh((logits * 40).reshape(16, -1).float() / 30) * 30 / temp[:, None]
    top = capped.max(dim=1).values
    picked = capped.gather(1, k.argmax[:, None]).squeeze(1)
    assert torch.all((picked >= top - 1e-6 * top.abs())[~pinned])
    assert torch.equal(k.argmax[pinned], ptok[pinned])
    unique = (capped >= top[:, None] - 1e-6 * top.abs()[:, None]).sum(dim=1) == 1
    assert torch.equal(k.argmax[unique], r.argmax[unique])
    assert torch.equal(k.sample, r.sample)
    torch.testing.assert_close(k.entropy, r.entropy, rtol=1e-4, atol=1e-5)
    # tanh through exp may land one bf16 rounding step apart
    torch.testing.assert_close(k.scaled_logits.float(), r.scaled_logits.float(), rtol=1.6e-2, atol=1e-2)


def test_ragged_segments_and_per_request_bounds() -> None:
    v = 613
    offsets = [0, 3, 3, 20, 21]  # an empty request and a one-row request too
    n = offsets[-1]
    logits = torch.randn(n, v) * 4
    noise = torch.rand(n, v).clamp_(1e-7, 1 - 1e-7)
    renoise = torch.randint(0, v, (n,))
    bounds = torch.tensor([0.05, 0.1, 3.0, 0.2])
    k, r = _both(logits, 0.7, renoise_tokens=renoise, noise=noise, entropy_bound=bounds, segments=offsets)
    assert torch.equal(k.accepted, r.accepted)
    assert torch.equal(k.next_canvas, r.next_canvas)


def test_in_kernel_noise_is_seeded() -> None:
    """Same seed, same samples; another seed, other samples (the distribution is checked on the GPU, 200k rows)."""
    v, rows = 50, 24
    logits = torch.zeros(rows, v)  # uniform: every sample is pure noise
    zeros = torch.zeros(rows, dtype=torch.long)
    a = denoise_step(logits, 1.0, renoise_tokens=zeros, seed=1234, impl="triton")
    b = denoise_step(logits, 1.0, renoise_tokens=zeros, seed=1234, impl="triton")
    c = denoise_step(logits, 1.0, renoise_tokens=zeros, seed=99, impl="triton")
    assert torch.equal(a.sample, b.sample)
    assert not torch.equal(a.sample, c.sample)
    assert int(a.sample.max()) < v and len(set(a.sample.tolist())) > 5


def test_in_kernel_noise_samples_the_softmax() -> None:
    """The hashed in-kernel noise draws from softmax(logits / T): a chi-square test over 400 rows each for one global
    seed and for per-row seeds (the interpreter is slow; the GPU test draws 200k rows)."""
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4])
    rows = 400
    logits = (probs.log() * 0.7).expand(rows, 4).contiguous()  # at T = 0.7 the scaled logits are log(probs)
    zeros = torch.zeros(rows, dtype=torch.long)
    for seed in (5, torch.arange(rows, dtype=torch.int32) * 7 + 3):
        out = denoise_step(logits, 0.7, renoise_tokens=zeros, seed=seed, impl="triton")
        counts = torch.bincount(out.sample, minlength=4).double()
        expected = probs.double() * rows
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        assert chi2 < 21.1, (chi2, counts.tolist())  # 3 degrees of freedom: p < 1e-4


def test_reference_matches_transformers_sampler() -> None:
    """The reference's acceptance equals transformers' EntropyBoundSampler on the same logits and samples."""
    from transformers.models.diffusion_gemma.generation_diffusion_gemma import (
        EntropyBoundSampler,
        EntropyBoundSamplerConfig,
        LinearTemperatureScheduleLogitsProcessor,
    )

    b, c, v, steps = 2, 24, 401, 16
    raw = torch.randn(b, c, v) * 5
    proc = LinearTemperatureScheduleLogitsProcessor(0.4, 0.8, steps)
    for cur_step in (steps, 7, 1):
        scaled = proc(None, raw, cur_step=cur_step)
        noise = torch.rand(b * c, v).clamp_(1e-7, 1 - 1e-7)
        renoise = torch.randint(0, v, (b * c,))
        temp = linear_temperature(cur_step, steps, 0.4, 0.8)
        out = denoise_step_reference(
            raw.view(b * c, v), temp, noise=noise, renoise_tokens=renoise, entropy_bound=0.1, segments=[0, c, 2 * c]
        )
        sampler = EntropyBoundSampler(EntropyBoundSamplerConfig(entropy_bound=0.1), c, v, steps)
        current = torch.randint(0, v, (b, c))
        accepted = sampler.accept_canvas(current, out.sample.view(b, c), scaled, cur_step)
        assert torch.equal(sampler.accepted_token_mask.view(-1), out.accepted)
        assert torch.equal(
            torch.where(sampler.accepted_token_mask, accepted, -1).view(-1),
            torch.where(out.accepted, out.next_canvas, -1),
        )
        assert torch.equal(out.argmax.view(b, c), scaled.argmax(-1))


def test_probs_output_and_canvas_widths() -> None:
    """Softmax output for the self-conditioning input; rows past a request's width are never accepted."""
    b, c, v = 3, 16, 1029
    logits, noise, temp, renoise, pinned, ptok = _inputs(b, c, v)
    widths = torch.tensor([16, 5, 1])
    k, r = _both(
        logits,
        temp,
        renoise_tokens=renoise,
        noise=noise,
        entropy_bound=2.0,
        pinned=pinned,
        pinned_tokens=ptok,
        probs_dtype=torch.float32,
        widths=widths,
    )
    torch.testing.assert_close(k.probs, r.probs, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(k.probs.sum(-1), torch.ones(b * c), rtol=1e-5, atol=1e-5)
    pos = torch.arange(c).repeat(b)
    past = pos >= widths.repeat_interleave(c)
    assert not bool((k.accepted & past & ~pinned).any())
    assert torch.equal(k.accepted, r.accepted)
    assert torch.equal(k.next_canvas, r.next_canvas)


def test_per_row_seeds_make_rows_independent_of_their_batch_position() -> None:
    v = 300
    logits = torch.randn(6, v)
    seeds = torch.tensor([11, 12, 13, 14, 15, 16], dtype=torch.int32)
    zeros = torch.zeros(6, dtype=torch.long)
    a = denoise_step(logits, 0.8, renoise_tokens=zeros, seed=seeds, impl="triton")
    perm = torch.tensor([3, 0, 5, 1, 4, 2])
    b = denoise_step(logits[perm], 0.8, renoise_tokens=zeros, seed=seeds[perm], impl="triton")
    assert torch.equal(a.sample[perm], b.sample)


def test_cdf_sampling_draws_the_softmax() -> None:
    """``sample="cdf"`` (one uniform a row, inverse CDF in the probabilities pass): a chi-square test over 400 rows for
    one global seed and for per-row seeds, as for the Gumbel noise above."""
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4])
    rows = 400
    logits = (probs.log() * 0.7).expand(rows, 4).contiguous()
    zeros = torch.zeros(rows, dtype=torch.long)
    for seed in (5, torch.arange(rows, dtype=torch.int32) * 7 + 3):
        out = denoise_step(logits, 0.7, renoise_tokens=zeros, seed=seed, probs_dtype=torch.float32, sample="cdf",
                           impl="triton")  # fmt: skip
        counts = torch.bincount(out.sample, minlength=4).double()
        expected = probs.double() * rows
        chi2 = float(((counts - expected) ** 2 / expected).sum())
        assert chi2 < 21.1, (chi2, counts.tolist())  # 3 degrees of freedom: p < 1e-4


def test_cdf_sampling_over_many_lanes_and_a_ragged_block() -> None:
    """A vocabulary of 300 in blocks of 64 (4-5 entries a lane, the last block ragged), softcap on: the lane-by-lane
    order reaches every part of the vocabulary at its rate (a chi-square over the argmax, the lanes in four groups and
    the first / later blocks); seeded rows reproduce."""
    v, rows = 300, 400
    p = torch.softmax(torch.randn(v), 0)
    logits = (p.log() + 3.0).expand(rows, v).contiguous()
    q = torch.softmax((torch.tanh(logits[0] / 30.0) * 30.0).double(), 0)
    seeds = torch.arange(rows, dtype=torch.int32) * 3 + 1
    kw = dict(renoise_tokens=torch.zeros(rows, dtype=torch.long), probs_dtype=torch.float32, softcap=30.0,
              sample="cdf", block_v=64, impl="triton")  # fmt: skip
    out = denoise_step(logits, 1.0, seed=seeds, **kw)
    assert out.sample.min() >= 0 and out.sample.max() < v
    idx = torch.arange(v)
    top = int(q.argmax())
    # bins: the argmax; the rest by lane group (lane % 64 // 16) and by first block vs later blocks
    bin_of = torch.where(idx == top, 0, 1 + (idx % 64) // 16 + 4 * (idx >= 64).long())
    counts = torch.bincount(bin_of[out.sample], minlength=9).double()
    expected = torch.zeros(9, dtype=torch.float64).index_add_(0, bin_of, q) * rows
    chi2 = float(((counts - expected) ** 2 / expected).sum())
    assert chi2 < 33.7, (chi2, counts.tolist(), expected.tolist())  # 8 degrees of freedom: p < 1e-4
    again = denoise_step(logits[:40], 1.0, seed=seeds[:40], **{**kw, "renoise_tokens": kw["renoise_tokens"][:40]})
    assert torch.equal(out.sample[:40], again.sample)


def test_cdf_sampling_leaves_every_other_output_as_gumbel_does() -> None:
    b, c, v = 2, 8, 517
    logits, _, temp, renoise, pinned, ptok = _inputs(b, c, v)
    kw = dict(renoise_tokens=renoise, seed=torch.arange(b * c, dtype=torch.int32), entropy_bound=0.5, pinned=pinned,
              pinned_tokens=ptok, probs_dtype=torch.bfloat16, impl="triton")  # fmt: skip
    g = denoise_step(logits, temp, sample="gumbel", **kw)
    cdf = denoise_step(logits, temp, sample="cdf", **kw)
    assert torch.equal(g.argmax, cdf.argmax) and torch.equal(g.entropy, cdf.entropy)
    assert torch.equal(g.probs, cdf.probs) and torch.equal(g.accepted, cdf.accepted)
    assert not torch.equal(g.sample, cdf.sample)  # the other way of sampling did run (16 spread rows)
    # the next canvas holds the sample where accepted, the renoise token elsewhere, the pin where pinned
    exp = torch.where(cdf.accepted, cdf.sample, renoise)
    exp = torch.where(pinned, ptok, exp)
    assert torch.equal(cdf.next_canvas, exp)
    with pytest.raises(ValueError, match="sample"):
        denoise_step(logits, temp, sample="multinomial", **kw)


def test_cdf_sampling_near_one_hot_rows_keep_their_rare_tokens() -> None:
    """Rows whose argmax holds ~97% of the mass: the other tokens still come up at their rate (3%), not never."""
    v, rows = 64, 1000
    logits = torch.full((rows, v), -1.0)
    logits[:, 5] = 6.0  # p(5) = e^7 / (e^7 + 63) ~ 0.946
    q = torch.softmax(logits[0].double(), 0)
    out = denoise_step(logits, 1.0, renoise_tokens=torch.zeros(rows, dtype=torch.long),
                       seed=torch.arange(rows, dtype=torch.int32), probs_dtype=torch.float32, sample="cdf",
                       impl="triton")  # fmt: skip
    other = float((out.sample != 5).double().mean())
    expect = float(1 - q[5])
    assert abs(other - expect) < 4 * (expect * (1 - expect) / rows) ** 0.5, (other, expect)


rerun_if_late(globals(), __file__, _LATE)

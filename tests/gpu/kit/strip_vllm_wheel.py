"""Rebuild a vllm wheel without the parts TRITON_ATTN inference on Hopper does not need (for the device kit).

usage: python3 tests/gpu/kit/strip_vllm_wheel.py [--keep PREFIX ...] IN.whl OUT.whl (build.sh runs it)
``--keep PREFIX`` keeps the entries of DROP_PREFIXES that PREFIX starts (the 0.33 kit keeps FlashAttention-3:
``--keep vllm/vllm_flash_attn/_vllm_fa3_C``). Writes a fresh RECORD (sha256 of every kept file) and prints what
was dropped.
"""

import base64
import csv
import hashlib
import io
import sys
import zipfile

DROP_PREFIXES = (
    "vllm/vllm_flash_attn/_vllm_fa2_C",  # FlashAttention-2 kernels (305 MB)
    "vllm/vllm_flash_attn/_vllm_fa3_C",  # FlashAttention-3 kernels (153 MB)
    "vllm/vllm_flash_attn/cute/",  # FA4 (CuTe DSL, needs nvidia-cutlass-dsl)
    "vllm/vllm-rs",  # Rust front-end binary (43 MB)
    "vllm/third_party/deep_gemm/",  # DeepGEMM (FP8 GEMMs) headers + .so (34 MB)
    "vllm/third_party/fmha_sm100/",  # Blackwell FMHA headers (29 MB)
    "vllm/_flashmla_C",
    "vllm/_flashmla_extension_C",  # FlashMLA (MLA models only)
    "vllm/_qutlass_C",  # FP4 quant kernels
    "vllm/entrypoints/serve/instrumentator/static/",  # swagger UI assets
)
# Without the FA2/FA3 extensions vllm.vllm_flash_attn raises ImportError at import,
# and fa_utils (imported by Gemma4's config hook) imports it unconditionally on CUDA.
# Keep the package importable; calling FA kernels would still fail (we use TRITON_ATTN).
PATCHES = {
    "vllm/vllm_flash_attn/__init__.py": (
        b"if not (FA2_AVAILABLE or FA3_AVAILABLE):\n    raise ImportError(",
        b"if False:  # stripped kit: FA2/FA3 extensions removed\n    raise ImportError(",
    ),
}


def b64(d):
    return base64.urlsafe_b64encode(hashlib.sha256(d).digest()).rstrip(b"=").decode()


args, keep = sys.argv[1:], []
while args and args[0] == "--keep":
    keep.append(args[1])
    args = args[2:]
if len(args) != 2:
    sys.exit(__doc__)
for k in keep:
    if not any(p.startswith(k) for p in DROP_PREFIXES):
        sys.exit(f"--keep {k}: no drop prefix starts with it")  # a typo would silently keep nothing
DROP_PREFIXES = tuple(p for p in DROP_PREFIXES if not any(p.startswith(k) for k in keep))
src, dst = args
zin = zipfile.ZipFile(src)
record_name = next(n for n in zin.namelist() if n.endswith(".dist-info/RECORD"))
dropped, dropped_bytes, rows = [], 0, []
with zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED, compresslevel=6) as zout:
    for info in zin.infolist():
        n = info.filename
        if n == record_name:
            continue
        if n.startswith(DROP_PREFIXES):
            dropped.append(n)
            dropped_bytes += info.file_size
            continue
        data = zin.read(n)
        if n in PATCHES:
            old, new = PATCHES[n]
            assert data.count(old) == 1, f"patch target not found in {n}"
            data = data.replace(old, new)
        zi = zipfile.ZipInfo(n, date_time=info.date_time)
        zi.external_attr = info.external_attr
        zi.compress_type = zipfile.ZIP_DEFLATED
        zout.writestr(zi, data)
        rows.append((n, f"sha256={b64(data)}", str(len(data))))
    rows.append((record_name, "", ""))
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)  # quotes names that contain commas
    zout.writestr(record_name, buf.getvalue())
top = {}
for n in dropped:
    k = "/".join(n.split("/")[:3]) + "/" if n.count("/") > 2 else n
    top[k] = top.get(k, 0) + 1
if keep:
    print(f"kept: {', '.join(keep)}")
print(f"dropped {len(dropped)} files, {dropped_bytes / 1e6:.0f} MB unpacked:")
for k in sorted(top):
    print(f"  {k} ({top[k]} files)")

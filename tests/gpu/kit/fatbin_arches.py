"""Bytes of CUDA code per GPU architecture in a shared library's ``.nv_fatbin``; optionally a Hopper-only copy.

usage: python3 tests/gpu/kit/fatbin_arches.py LIB.so [--zero OUT.so]

``--zero`` writes a copy in which every entry but sm_90 ELF code and PTX at or below sm_90 (which the driver can
compile for Hopper) has its payload zeroed: the library keeps its layout and the zeros compress to almost nothing.
Whether the CUDA driver loads such a copy on the H200 is not yet tried. Entry layout as cuobjdump reads it
(fatbin header: magic 0xBA55ED50, header size, body size; each entry: kind 1 = PTX / 2 = ELF, header size, padded
payload size, ..., sm version at byte 28).
"""

from __future__ import annotations

import collections
import struct
import subprocess
import sys

MAGIC = 0xBA55ED50
HOPPER = 90


def fatbin_section(path: str) -> tuple[int, int]:
    """(file offset, size) of the library's ``.nv_fatbin`` section."""
    for line in subprocess.run(
        ["readelf", "-SW", path], capture_output=True, text=True, check=True
    ).stdout.splitlines():
        cols = line.replace("[ ", "[").split()
        if ".nv_fatbin" in cols:
            i = cols.index(".nv_fatbin")
            return int(cols[i + 3], 16), int(cols[i + 4], 16)
    raise SystemExit(f"{path}: no .nv_fatbin section")


def main(argv: list[str]) -> None:
    path = argv[0]
    out = argv[2] if len(argv) > 2 and argv[1] == "--zero" else None
    off, size = fatbin_section(path)
    data = bytearray(open(path, "rb").read())
    per: collections.Counter[tuple[int, int]] = collections.Counter()
    kept = entries = 0
    pos, end = off, off + size
    while pos + 16 <= end:
        magic, _ver, hsz, body = struct.unpack_from("<IHHQ", data, pos)
        if magic != MAGIC:  # fatbins are 8-byte aligned one after another
            pos += 8
            continue
        e, stop = pos + hsz, pos + hsz + body
        while e < stop:
            kind, _ev, ehsz, padded = struct.unpack_from("<HHII", data, e)
            sm = struct.unpack_from("<I", data, e + 28)[0]
            total = ehsz + padded
            per[(sm, kind)] += total
            entries += 1
            keep = sm == HOPPER or (kind == 1 and sm <= HOPPER)
            kept += total if keep else 0
            if out and not keep:
                data[e + ehsz : e + total] = bytes(padded)
            e += total
        pos = stop
    print(f"{path}: .nv_fatbin {size / 1e6:.1f} MB in {entries} entries")
    for sm in sorted({s for s, _ in per}):
        print(f"  sm_{sm}: ELF {per[(sm, 2)] / 1e6:.1f} MB, PTX {per[(sm, 1)] / 1e6:.1f} MB")
    print(f"  kept for Hopper: {kept / 1e6:.1f} MB; droppable: {(size - kept) / 1e6:.1f} MB")
    if out:
        open(out, "wb").write(data)


if __name__ == "__main__":
    main(sys.argv[1:])

#!/usr/bin/env bash
# The two pure-Python wheels vLLM 0.26's fp8 quantization imports (via compressed-tensors) and the stripped kit lacks:
# into .kit5/ for a device run's carry (tests/gpu/run_device.sh E13 unpacks them into the kit's site folder).
set -euo pipefail
cd "$(dirname "$0")/../.."
mkdir -p .kit5
python3 -m pip download -q --no-deps -d .kit5 "compressed-tensors==0.20.1" "loguru==0.7.3"
ls -la .kit5

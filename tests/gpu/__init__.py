"""GPU tests, run on the H200 by tests/gpu/run_device.sh (docs/gpu.md); marked gpu, so the CPU suite skips them."""

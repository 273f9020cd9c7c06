"""The benchmarks (bench/): the CPU scripts run small, and the GPU tables rendered from recorded rows."""

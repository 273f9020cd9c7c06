"""A tiny DiffusionGemma checkpoint built on the spot (random weights, real architecture): what the embedded default
serves when no trained model ships, and the model the CPU tests run every code path on (``builder``)."""

"""The Triton kernels (backend/kernels/) against their PyTorch references, in Triton's CPU interpreter."""

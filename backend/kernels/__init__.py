"""Denoising-step kernels (Triton) and their PyTorch reference; see :mod:`.denoise` and :mod:`.reference`."""

from .denoise import HAVE_TRITON, denoise_step, kernels_usable
from .reference import StepOutput, denoise_step_reference, linear_temperature

__all__ = [
    "HAVE_TRITON",
    "StepOutput",
    "denoise_step",
    "denoise_step_reference",
    "kernels_usable",
    "linear_temperature",
]

"""The optional compiled kernels (refnorm/norms/_fused.c); everything else is in pyproject.toml.

optional=True: without a C compiler the install still succeeds and refnorm runs its NumPy path,
which gives the same bits (docs/performance.md). -ffp-contract=off: no fused multiply-add, so every
operation rounds as NumPy's does.
"""
from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "refnorm.norms._fused", ["refnorm/norms/_fused.c"],
    depends=["refnorm/norms/_fused_kernels.h"],
    extra_compile_args=["-O3", "-std=gnu11", "-ffp-contract=off", "-fno-fast-math"],
    optional=True,
)])

"""Hypothesis strategies for normalizer inputs (tests only; refnorm.strategies comes with issue 6)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp


def finite(scale: float = 10.0):
    return st.floats(-scale, scale, allow_nan=False, allow_infinity=False, width=64)


def arrays(shape, scale: float = 10.0):
    """float64 arrays of ``shape`` with finite entries in [-scale, scale]."""
    return hnp.arrays(np.float64, shape, elements=finite(scale))


def shapes(min_dims=2, max_dims=4, min_side=1, max_side=5):
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


@st.composite
def well_spread(draw, shape, scale: float = 10.0, min_std: float = 1e-2, axes=None):
    """Random-normal-like arrays: seed drawn by hypothesis, offset and scale drawn too.

    Avoids the degenerate float draws (all equal, subnormal spreads) that make finite-difference
    checks meaningless, while hypothesis still explores shapes, offsets and scales.
    """
    seed = draw(st.integers(0, 2**32 - 1))
    offset = draw(st.floats(-scale, scale))
    spread = draw(st.floats(min_std, scale))
    return offset + spread * np.random.default_rng(seed).standard_normal(shape)

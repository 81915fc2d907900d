"""Layer 1: the specification of every normalizer, the definition the fast path is tested against.

One module per normalizer, ``refnorm.specs.<name>``: plain whole-array float64 NumPy, forward and
backward, the equations of the normalizer's docstring written as code, one step per line with its
shape; no blocks, threads, pools, scratch buffers or compiled code. Shared math (a two-pass mean and
variance, the centred backward) is in ``_math.py``. Each module has:

    <name>(...), <name>_backward(...)      the readable functions
    forward(inputs, config, state, training) -> Forward;  backward(ctx, cot) -> Backward
                                           the ``evaluate`` contract (``refnorm.evaluate(..., engine="spec")``)
    AGREEMENT                              {array name: k}: where the fast path sums in another order, it
                                           agrees within k * 2^-52 * max|array| (the docstring says why);
                                           every array not listed has the same bits

tests/test_specs.py checks every golden case and hypothesis inputs, fast against spec, to AGREEMENT.
"""

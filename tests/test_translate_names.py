"""_translate.check_names, what every adapter checks of a call first: an input, state or cotangent name that
is not refnorm's for the op, or a required input left out, is a KeyError naming it and what was expected."""
import re

import numpy as np
import pytest

from refnorm.check.backends._translate import check_names
from refnorm.check.backends.base import Call

X, C = np.zeros((4, 3)), np.zeros(3)


def _call(op, inputs, state=None, cotangents=None):
    return Call(op, "float32", {}, True, inputs, cotangents or {}, state or {})


@pytest.mark.parametrize("call, message", [
    (_call("layer_norm", {"x": X, "gamma": C}),
     "layer_norm: unknown input(s) ['gamma']; expected ('x', 'weight', 'bias')"),
    (_call("layer_norm", {"weight": C}), "layer_norm: missing required input(s) ['x']"),
    (_call("batch_norm", {"x": X}, state={"running_std": C}),
     "batch_norm: unknown state ['running_std']; expected ('running_mean', 'running_var', 'num_batches_tracked')"),
    (_call("layer_norm", {"x": X}, state={"running_mean": C}), "layer_norm: unknown state ['running_mean']; "
                                                              "expected (none)"),
    (_call("layer_norm", {"x": X}, cotangents={"mean": C}),
     "layer_norm: cotangents for ['mean']; differentiable outputs: ('y',)"),
], ids=["input", "required", "state", "stateless", "cotangent"])
def test_a_name_that_is_not_refnorms_is_a_key_error_naming_it(call, message):
    with pytest.raises(KeyError, match=re.escape(message)):
        check_names(call)


def test_refnorms_own_names_pass():
    state = {"running_mean": C, "running_var": C, "num_batches_tracked": np.zeros(())}
    assert check_names(_call("batch_norm", {"x": X, "weight": C, "bias": C}, state, {"y": X})) is None

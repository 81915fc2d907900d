"""The helpers that repeated code was folded into (issue 37): each does what the copies it replaced did."""
import numpy as np
import pytest

from refnorm import registry
from refnorm.check.backends import _translate as T
from refnorm.check.backends.base import Call
from refnorm.derivations import _render
from refnorm.norms import _common as C


def _call(state):
    x = np.zeros((2, 3))
    return Call("batch_norm", "float32", {}, True, {"x": x}, {}, state)


def test_split_state_converts_the_floats_and_counts_as_int64():
    seen = []
    floats, count = T.split_state(
        _call({"running_mean": np.zeros(3), "running_var": np.ones(3), "num_batches_tracked": np.array(4.0)}),
        registry.get("batch_norm"), lambda what, a: seen.append(what) or np.asarray(a, np.float32))
    assert seen == ["state 'running_mean'", "state 'running_var'"]
    assert sorted(floats) == ["running_mean", "running_var"] and floats["running_var"].dtype == np.float32
    assert count.dtype == np.int64 and count == 4
    floats, count = T.split_state(_call({}), registry.get("batch_norm"), lambda what, a: a)
    assert floats == {} and count is None


def test_split_state_refuses_a_fractional_count():
    with pytest.raises(ValueError, match=r"batch_norm: state 'num_batches_tracked' must hold whole numbers"):
        T.split_state(_call({"num_batches_tracked": np.array(1.5)}), registry.get("batch_norm"), lambda w, a: a)


def test_affine_grads_has_an_entry_for_each_parameter_given():
    dx, dw, db = np.ones(2), np.full(2, 2.0), np.full(2, 3.0)
    assert list(C.affine_grads(dx, dw, db, True, True)) == ["x", "weight", "bias"]
    assert list(C.affine_grads(dx, dw, None, True, False)) == ["x", "weight"]
    assert list(C.affine_grads(dx, None, db, False, True)) == ["x", "bias"]
    assert C.affine_grads(dx, dw, db, True, True)["bias"] is db


def test_navigation_is_the_links_the_documents_had():
    assert _render.navigation("layer_norm", "batch_norm", "rms_norm") == (
        ("index", "README.md"), ("previous: batch_norm", "batch_norm.md"),
        ("code: refnorm/norms/layer_norm.py", "../refnorm/norms/layer_norm.py"), ("next: rms_norm", "rms_norm.md"))
    assert _render.navigation("batch_norm", None, "layer_norm")[1][0] == "code: refnorm/norms/batch_norm.py"
    assert len(_render.navigation("norm_quant", "local_response_norm")) == 3


def test_family_functions_read_the_document():
    from refnorm import derivations
    from refnorm.derivations import layer_norm
    assert layer_norm.render("markdown") == derivations.render("layer_norm", "markdown")
    assert layer_norm.steps() == layer_norm.document().steps() and layer_norm.steps()


def test_worker_context_is_a_forkserver_where_there_is_one():
    import multiprocessing as mp
    from refnorm.check.supervise import worker_context
    ctx = worker_context(["torch"])                 # the isolated runner's preload (no server is started)
    if "forkserver" in mp.get_all_start_methods():
        assert ctx.get_start_method() == "forkserver"
    else:
        assert ctx.get_start_method() == "spawn"

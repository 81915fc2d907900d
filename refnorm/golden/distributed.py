"""Distributed cases: a generated recipe, how it is parallelized, and how it is split across the ranks.

A distributed case is one line, ``PARALLEL SPLIT RECIPE``:

    batch unequal batch_norm shape=20x3x4x4 steps=["train","train","eval"]
    sequence empty layer_norm shape=24x64
    tensor single rms_norm shape=8x64 eps=1e-05

    PARALLEL  batch     SyncBatchNorm (batch_norm): the batch axis 0 is sharded; weight, bias and the
                        running statistics are replicated; mean and rstd (per channel) are replicated
              sequence  sequence parallelism (layer_norm, rms_norm): the tokens (axis 0) are sharded;
                        weight and bias are replicated and their gradients all-reduced (replicated);
                        mean and rstd (per row) are sharded with the rows
              tensor    tensor parallelism (rms_norm over the last axis): the hidden dimension is
                        sharded, and so are weight and its gradient; rstd (per row) is replicated
    SPLIT     equal     as equal as possible
              unequal   rank r holds (r + 1) * k of the length (the remainder to the last rank)
              single    rank 0 holds exactly one slice, the others share the rest equally
              empty     the last rank holds nothing, the others share the length equally
    RECIPE    a line of refnorm.golden.generate (the global case: its inputs, cotangents, state)

The split is part of the case; the sizes follow from it and the world size (``sizes``), and a world
size the case cannot be split into is a ``SplitError`` naming both. The judge sees the global case: the
reference is the global op (equal to the merged pieces for any split: refnorm/norms/distributed.py),
the gathered arrays are judged with the global op's bounds.

Which cases are distributed: those of ``CASES`` below (``refnorm check --world-size N`` runs them all,
or the lines given with --generate, each in this format); golden (stored) cases are not distributed.
"""
from __future__ import annotations

import dataclasses

import numpy as np

from ..errors import RefnormError
from . import generate

PARALLEL = {"batch": ("batch_norm",), "sequence": ("layer_norm", "rms_norm"), "tensor": ("rms_norm",)}
SPLITS = ("equal", "unequal", "single", "empty")


class SplitError(RefnormError):
    """A distributed case that cannot be parsed, or split into the ranks asked for."""


@dataclasses.dataclass(frozen=True)
class DistRecipe:
    text: str
    parallel: str
    split: str
    recipe: generate.Recipe

    @property
    def op(self) -> str:
        return self.recipe.case.op

    @property
    def id(self) -> str:
        return f"{self.op}/dist_{self.parallel}_{self.split}_{self.recipe.case.name}"

    @property
    def axis_length(self) -> int:
        x = self.recipe.case.inputs[generate.MAKERS[self.op][1]]
        return x[-1] if self.parallel == "tensor" else x[0]

    def sizes(self, world: int) -> list:
        """The length of each rank's shard along the sharded axis (module docstring)."""
        return split_sizes(self.split, self.axis_length, world, self.id)

    def sharded(self, part: str, name: str) -> bool:
        """Whether the array ``name`` of ``part`` (inputs, cotangents, outputs, grads, state) is sharded
        (else replicated: every rank holds the whole of it)."""
        if part == "state":
            return False
        if name in ("x", "y"):
            return True
        if name in ("weight", "bias"):              # inputs and their gradients
            return self.parallel == "tensor"
        return self.parallel == "sequence"          # mean, rstd: per row under sequence parallelism

    def axis(self, ndim: int) -> int:
        """The sharded axis of an array with ``ndim`` dimensions."""
        return ndim - 1 if self.parallel == "tensor" else 0


def split_sizes(split: str, length: int, world: int, what: str = "") -> list:
    if not isinstance(world, int) or world < 2:
        raise SplitError(f"world size {world!r}: expected an integer >= 2")
    need = {"equal": world, "unequal": world * (world + 1) // 2, "single": world, "empty": world - 1}[split]
    if length < need:
        raise SplitError(f"world size {world}: {what} has {length} slices along its sharded axis and cannot be "
                         f"split {split!r} into {world} ranks (needs >= {need}); use a smaller --world-size")
    if split == "equal":
        return [length // world + (r < length % world) for r in range(world)]
    if split == "unequal":
        k = length // need
        out = [(r + 1) * k for r in range(world)]
        out[-1] += length - sum(out)
        return out
    if split == "single":
        rest = split_sizes("equal", length - 1, world - 1) if world > 2 else [length - 1]
        return [1] + rest
    rest = split_sizes("equal", length, world - 1) if world > 2 else [length]
    return rest + [0]


def parse(text: str) -> DistRecipe:
    words = text.split()
    if len(words) < 3 or words[0] not in PARALLEL or words[1] not in SPLITS:
        raise SplitError(f"distributed case {text!r}: expected 'PARALLEL SPLIT RECIPE' with PARALLEL one of "
                         f"{', '.join(PARALLEL)} and SPLIT one of {', '.join(SPLITS)}")
    recipe = generate.parse(" ".join(words[2:]))
    if recipe.case.op not in PARALLEL[words[0]]:
        raise SplitError(f"distributed case {text!r}: {words[0]} parallelism applies to "
                         f"{', '.join(PARALLEL[words[0]])}, not {recipe.case.op}")
    if recipe.layout != "contiguous" or recipe.expect_error:
        raise SplitError(f"distributed case {text!r}: layout= and expect= are not supported here")
    if words[0] == "tensor" and recipe.case.config.get("normalized_shape") not in ([recipe.case.inputs["x"][-1]],):
        raise SplitError(f"distributed case {text!r}: tensor parallelism normalizes over the last axis only (k=1)")
    return DistRecipe(text, words[0], words[1], recipe)


def shard(d: DistRecipe, part: str, arrays: dict, sizes: list) -> list:
    """[rank's dict] of ``arrays``: each sharded one cut along its axis by ``sizes``, the others copied."""
    out = [{} for _ in sizes]
    cuts = np.cumsum(sizes)[:-1]
    for k, v in arrays.items():
        v = np.asarray(v)
        if d.sharded(part, k) and v.ndim:
            pieces = np.split(v, cuts, axis=d.axis(v.ndim))
        else:
            pieces = [v] * len(sizes)
        for r, p in enumerate(pieces):
            out[r][k] = np.array(p)
    return out


def gather(d: DistRecipe, part: str, per_rank: list) -> tuple:
    """(arrays, disagreements): sharded arrays concatenated along their axis in rank order; a replicated
    array is rank 0's, and every other rank whose copy is not bit for bit rank 0's is named in
    ``disagreements`` ("grads weight: rank 2"). A name some rank lacks, or shards that cannot be joined,
    raise ValueError naming the rank; an array that is not a NumPy array raises TypeError."""
    out, bad = {}, []
    names = set().union(*(set(p) for p in per_rank))
    for k in sorted(names):
        if not all(k in p for p in per_rank):
            missing = [r for r, p in enumerate(per_rank) if k not in p]
            raise ValueError(f"{part} {k!r}: rank(s) {missing} returned none")
        wrong = [r for r, p in enumerate(per_rank) if not isinstance(p[k], (np.ndarray, np.generic))]
        if wrong:
            raise TypeError(f"rank {wrong[0]} returned {part[:-1] if part != 'state' else part} {k!r} as a "
                            f"{type(per_rank[wrong[0]][k]).__name__}, expected a numpy.ndarray")
        vals = [np.asarray(p[k]) for p in per_rank]
        if d.sharded(part, k) and vals[0].ndim:
            axis = d.axis(vals[0].ndim)
            try:
                out[k] = np.concatenate(vals, axis=axis)
            except ValueError:
                odd = next((r for r, v in enumerate(vals) if v.ndim != vals[0].ndim or
                            v.shape[:axis] + v.shape[axis + 1:] != vals[0].shape[:axis] + vals[0].shape[axis + 1:]), 0)
                raise ValueError(f"rank {odd} returned {part[:-1] if part != 'state' else part} {k!r} of shape "
                                 f"{vals[odd].shape}: the ranks' shards {[v.shape for v in vals]} do not join along "
                                 f"axis {axis}") from None
        else:
            out[k] = vals[0]
            for r, v in enumerate(vals[1:], 1):
                if v.shape != vals[0].shape or v.dtype != vals[0].dtype or not np.array_equal(v, vals[0], equal_nan=True):
                    bad.append(f"{part} {k}: rank {r}")
    return out, bad


_T3E = 'steps=["train","train","eval"]'
# PARALLEL, recipe, why; every one in each split of SPLITS
_BASE = [
    ("batch", f"batch_norm shape=20x3x4x4 {_T3E}", "SyncBatchNorm, running statistics over two steps, then eval"),
    ("batch", "batch_norm shape=24x5 regime=mean1e3 dtype=float64", "SyncBatchNorm (N, C), mean-shifted, float64"),
    ("sequence", "layer_norm shape=24x64", "sequence-parallel LayerNorm"),
    ("sequence", "rms_norm shape=24x64 eps=1e-05", "sequence-parallel RMSNorm"),
    ("tensor", "rms_norm shape=8x64 eps=1e-05", "tensor-parallel RMSNorm (hidden dimension sharded)"),
]
_EXTRA = [
    ("batch", "unequal", "batch_norm shape=20x4x3 dtype=bfloat16", "SyncBatchNorm in bfloat16"),
    ("sequence", "unequal", "layer_norm shape=40x96 dtype=float16 regime=mean1e3", "float16, mean-shifted"),
    ("tensor", "unequal", "rms_norm shape=6x4x80 eps=1e-06 dtype=bfloat16", "QK-norm, head_dim sharded, bfloat16"),
]
# float16 and bfloat16 for every parallel kind, and the options a 16-bit or stateful kernel gets wrong, each
# in every split (issue 35): PARALLEL, recipe, why
_SIXTEEN = [
    ("batch", f"batch_norm shape=20x3x4x4 dtype=float16 {_T3E}", "SyncBatchNorm in float16, running statistics"),
    ("batch", "batch_norm shape=24x5 dtype=bfloat16 regime=mean1e3", "SyncBatchNorm (N, C) in bfloat16, mean-shifted"),
    ("sequence", "layer_norm shape=24x64 dtype=float16", "sequence-parallel LayerNorm in float16"),
    ("sequence", "layer_norm shape=24x64 dtype=bfloat16", "sequence-parallel LayerNorm in bfloat16"),
    ("sequence", "rms_norm shape=24x64 eps=1e-05 dtype=float16", "sequence-parallel RMSNorm in float16"),
    ("sequence", "rms_norm shape=24x64 eps=1e-05 dtype=bfloat16", "sequence-parallel RMSNorm in bfloat16"),
    ("tensor", "rms_norm shape=8x64 eps=1e-05 dtype=float16", "tensor-parallel RMSNorm in float16"),
    ("tensor", "rms_norm shape=8x64 eps=1e-05 dtype=bfloat16", "tensor-parallel RMSNorm in bfloat16"),
]
_OPTIONS = [
    ("batch", 'batch_norm shape=20x3x5 momentum=null nbt=2 steps=["train","train","eval"]',
     "SyncBatchNorm with momentum=None: the cumulative average 1/num_batches_tracked"),
    ("batch", 'batch_norm shape=20x3x5 stats=false steps=["train","eval"]',
     "SyncBatchNorm without running statistics: eval normalizes with the global batch statistics"),
    ("batch", "batch_norm shape=20x3x5 affine=none dtype=bfloat16", "SyncBatchNorm without weight and bias"),
    ("batch", 'batch_norm shape=20x3x5 steps=["eval","train","eval"]',
     "SyncBatchNorm starting in eval: the running statistics before any training step"),
    ("sequence", "rms_norm shape=24x64 eps=null dtype=bfloat16", "sequence-parallel RMSNorm, eps=None"),
    ("tensor", "rms_norm shape=8x64 eps=null", "tensor-parallel RMSNorm, eps=None (finfo eps)"),
    ("sequence", "layer_norm shape=24x64 affine=w", "sequence-parallel LayerNorm without bias"),
]
CASES = ([(f"{p} {s} {r}", why) for p, r, why in _BASE for s in SPLITS]
         + [(f"{p} {s} {r}", why) for p, s, r, why in _EXTRA]
         + [(f"{p} {s} {r}", why) for p, r, why in _SIXTEEN + _OPTIONS for s in SPLITS])


def cases(texts=()) -> list:
    """The parsed distributed cases: ``texts`` (lines as in the module docstring), or every one of CASES."""
    return [parse(t) for t in (texts or [t for t, _ in CASES])]


def check_world(dcases, world: int) -> None:
    """SplitError naming the first case that ``world`` ranks cannot split (before any process starts)."""
    for d in dcases:
        d.sizes(world)

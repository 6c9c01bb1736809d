"""to_device(obj, device): every tensor in nested lists, tuples and dicts moved; the rest kept.

The probe builds each structure on the CPU and moves it to PyTorch's data-less 'meta' device,
which exists in every build: a real move, observable without a GPU.
"""
from __future__ import annotations

import random

from ...probe import build_structure, fingerprint, observe_structure, run_learner
from ...probe.structures import box_spec, leaf_spec, tensor_spec
from ..framework import check, expect_no_error, fail
from .to_device_rules import LEAF_TYPES, REBUILD, STRING_FIX, fail_in_call, verify_nodes

DTYPES = ("float32", "int64", "bool", "float16")
KEYS = ("inputs", "targets", "mask", "ids", "lengths", "pixels", "labels", "extra")


VISIBLE = [tensor_spec([2, 3]), box_spec("dict", {
    "images": tensor_spec([4, 3]), "labels": tensor_spec([4], "int64"),
    "extra": box_spec("tuple", [tensor_spec([2]), box_spec("list", [
        tensor_spec([1], "bool"), leaf_spec("int", 7), leaf_spec("str", "id-7"),
        leaf_spec("none")])]),
    "stats": {"kind": "ndarray", "shape": [3]}}), leaf_spec("int", 5)]


def _random(rng: random.Random, depth: int) -> dict:
    leaves = ["tensor", "tensor", "tensor", "int", "float", "str", "none", "bool", "ndarray"]
    kind = rng.choice(leaves + (["list", "tuple", "dict"] * 3 if depth else []))
    if kind == "tensor":
        shape = [rng.randint(1, 4) for _ in range(rng.randint(0, 2))]
        return tensor_spec(shape, rng.choice(DTYPES))
    if kind == "ndarray":
        return {"kind": "ndarray", "shape": [rng.randint(1, 4)]}
    if kind in ("list", "tuple"):
        return box_spec(kind, [_random(rng, depth - 1) for _ in range(rng.randint(1, 3))])
    if kind == "dict":
        return box_spec("dict", {key: _random(rng, depth - 1) for key in rng.sample(KEYS, 2)})
    return leaf_spec(kind, {"int": rng.randint(-9, 99), "float": round(rng.uniform(-1, 1), 3),
                        "str": rng.choice(["cat", "id-3"]), "none": None,
                        "bool": rng.random() < 0.5}[kind])


def make_inputs(seed: int, hidden: bool) -> dict:
    if not hidden:
        return {"device": "meta", "structures": VISIBLE}
    rng = random.Random(seed)
    nested = tensor_spec([rng.randint(1, 3), 2], rng.choice(DTYPES))
    for kind in rng.sample(["list", "tuple", "dict"], 3):  # each container around a tensor
        items = [nested, _random(rng, 0)]
        rng.shuffle(items)
        nested = box_spec("dict", dict(zip(rng.sample(KEYS, 2), items, strict=True))) \
            if kind == "dict" else box_spec(kind, items)
    empty = box_spec("dict", {"nothing": box_spec("dict", {}), "none": box_spec("tuple", []),
                          "zero": box_spec("list", []), "value": tensor_spec([1], "bool")})
    return {"device": "meta", "structures": [nested, empty, _random(rng, 3), _random(rng, 3),
                                             leaf_spec("str", "x"), leaf_spec("none")]}


def probe(to_device, inputs):
    """Build each structure, call to_device(structure, 'meta'); report every node of the result
    along the expected structure, whether the structure passed in was changed, and the paths of
    the containers that came back as the very objects passed in."""
    import torch

    def as_is(result, original, path, out):
        if isinstance(original, (list, tuple, dict)) and result is original:
            out.append(path)
        elif isinstance(original, dict) and isinstance(result, dict):
            for key in original.keys() & result.keys():
                as_is(result[key], original[key], [*path, key], out)
        elif isinstance(original, (list, tuple)) and isinstance(result, (list, tuple)):
            for index, (got, given) in enumerate(zip(result, original, strict=False)):
                as_is(got, given, [*path, index], out)
        return out

    def innermost_call(error):
        """What the innermost call of to_device() that the error passed through was given."""
        import inspect
        import traceback

        own = getattr(inspect.unwrap(to_device), "__code__", None)  # through functools.wraps()
        frames = [frame for frame, _ in traceback.walk_tb(error.__traceback__)
                  if frame.f_code is own and own.co_argcount]
        if not frames:
            return None
        given = frames[-1].f_locals.get(own.co_varnames[0])
        kind = type(given)
        return {"argument": own.co_varnames[0], "module": kind.__module__, "type": kind.__name__,
                "container": next((c.__name__ for c in (list, tuple, dict)
                                   if isinstance(given, c)), None),
                "namedtuple": isinstance(given, tuple) and hasattr(given, "_fields")}

    def traced(obj, device):
        try:
            return to_device(obj, device)
        except Exception as error:
            failing.append(innermost_call(error))
            raise

    results = []
    for spec in inputs["structures"]:
        original = build_structure(spec)
        before, failing = fingerprint(original), []
        run = run_learner(traced, original, torch.device(inputs["device"]))
        results.append({"error": run.error, "changed": fingerprint(original) != before,
                        "failing_call": failing[0] if run.error and failing else None,
                        "nodes": None if run.error else observe_structure(run.value, spec),
                        "as_is": [] if run.error else as_is(run.value, original, [], [])})
    return results


HINTS = {
    "AttributeError": lambda error: (
        "only tensors have `.to()`: test `isinstance(obj, torch.Tensor)` first and return "
        "anything that is not a tensor, list, tuple or dict unchanged."
        if error["attribute"] == "to" else None),
    "RecursionError": STRING_FIX,
    "TypeError": "a tuple cannot be changed, and `tuple()` takes one iterable: build new "
                 f"containers, e.g. {REBUILD['tuple']} "
                 "(`type(obj)(*items)` suits namedtuples only).",
    "ValueError": "loop over a dict with `.items()` to get (key, value) pairs.",
}


@check(success="to_device() moves every tensor in nested tuples, lists and dicts to the device "
               "it is given ('meta' here) and keeps everything else as it was.",
       make_inputs=make_inputs, probe=probe)
def check_to_device(inputs, observations, hidden):
    alone = next((repr(spec["value"]) for spec, result in zip(
        inputs["structures"], observations, strict=True) if spec["kind"] in LEAF_TYPES and
        spec["kind"] not in ("none", "tensor", "ndarray") and result["nodes"] and
        result["nodes"][0]["type"] == "NoneType"), "")
    for spec, result in zip(inputs["structures"], observations, strict=True):
        if result["error"] and result["failing_call"]:
            fail_in_call(result["error"], result["failing_call"], HINTS)
        expect_no_error(result["error"], "to_device()", hints=HINTS)
        if result["changed"]:
            fail("to_device() changed the structure it was given instead of returning a new one.",
                 "build new lists, tuples and dicts and return them; never assign into `obj`.")
        verify_nodes(spec, result["nodes"], inputs["device"], result["as_is"], alone)

"""to_device(obj, device): every tensor in nested lists, tuples and dicts moved; the rest kept.

The probe builds each structure on the CPU and moves it to PyTorch's data-less 'meta' device,
which exists in every build: a real move, observable without a GPU.
"""
from __future__ import annotations

import random

from ...probe import build_structure, fingerprint, observe_structure, run_learner
from ...probe.structures import box_spec, leaf_spec, spec_at, tensor_spec
from ..framework import a, check, expect_no_error, fail

DTYPES = ("float32", "int64", "bool", "float16")
KEYS = ("inputs", "targets", "mask", "ids", "lengths", "pixels", "labels", "extra")
LEAF_TYPES = {"int": "int", "float": "float", "str": "str", "none": "NoneType", "bool": "bool",
              "ndarray": "ndarray", "tensor": "Tensor"}


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
    along the expected structure, and whether the structure passed in was changed."""
    import torch

    results = []
    for spec in inputs["structures"]:
        original = build_structure(spec)
        before = fingerprint(original)
        run = run_learner(to_device, original, torch.device(inputs["device"]))
        results.append({"error": run.error, "changed": fingerprint(original) != before,
                        "nodes": None if run.error else observe_structure(run.value, spec)})
    return results


def _at(path: list) -> str:
    """obj['extra'][1][0] for the path ['extra', 1, 0]."""
    return "obj" + "".join(f"[{step!r}]" for step in path)


REBUILD = {"tuple": "`tuple(to_device(item, device) for item in obj)`",
           "list": "`[to_device(item, device) for item in obj]`",
           "dict": "`{key: to_device(value, device) for key, value in obj.items()}`"}
STRING_FIX = ("a string is a sequence too: recurse only into list, tuple and dict, and return "
              "every other value unchanged.")
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


def _verify_container(node: dict, expected: dict, where: str) -> None:
    kind, got = node["kind"], node["type"]
    if got != kind:
        fail(f"At {where}, a {kind} came back as {a(got)}.",
             f"rebuild a {kind} as a {kind}: {REBUILD[kind]}.")
    if not node.get("same_keys", True) or (kind != "dict"
                                           and node.get("length", 0) != len(expected["items"])):
        fail(f"At {where}, the {kind} came back with other items or keys.",
             f"keep every item and key: {REBUILD[kind]}.")


def _verifytensor_spec(node: dict, expected: dict, where: str, target: str) -> None:
    if node["dtype"] != expected["dtype"]:
        fail(f"At {where}, {a(expected['dtype'])} tensor became {node['dtype']}.",
             "pass only the device: `obj.to(device)`; a dtype would convert every tensor.")
    if node["device"] == target:
        return
    if node["parent"] is None:
        fail(f"A tensor passed on its own came back on {node['device']!r}, not on "
             f"{target!r}, the device passed in.",
             "return `obj.to(device)` with the `device` argument you were given; "
             "`.to()` returns a new tensor and leaves `obj` as it was.")
    parent = node["parent"]
    fail(f"At {where}, a tensor inside a {parent} is on {node['device']!r}, "
         f"not on {target!r}.", f"recurse into {parent}s: {REBUILD[parent]}.")


def _verify_nodes(spec: dict, nodes: list, target: str) -> None:
    """Containers keep their type and size, leaves their type and value, tensors move."""
    for node in nodes:
        kind, got, where = node["kind"], node["type"], _at(node["path"])
        expected = spec_at(spec, node["path"])
        if got == "NoneType" and kind != "none":
            fail(f"At {where}, {a(LEAF_TYPES.get(kind, kind))} came back as None.",
                 "every branch must `return` its result: `obj.to(device)` for a tensor, the new "
                 "container for a container, `obj` itself otherwise.")
        if kind in REBUILD:
            _verify_container(node, expected, where)
        elif got != LEAF_TYPES[kind]:
            fail(f"At {where}, {a(LEAF_TYPES[kind])} came back as {a(got)}.",
                 STRING_FIX if kind == "str" else "return `obj.to(device)` for a tensor and "
                 "leave values that are not tensors untouched.")
        elif kind == "tensor":
            _verifytensor_spec(node, expected, where, target)
        elif "value" in node and node["value"] != expected.get("value"):
            fail(f"At {where}, {a(got)} value was changed.",
                 STRING_FIX if kind == "str" else "return values that are not tensors unchanged.")


@check(success="to_device() moves every tensor in nested tuples, lists and dicts to the device "
               "it is given ('meta' here) and keeps everything else as it was.",
       make_inputs=make_inputs, probe=probe)
def check_to_device(inputs, observations, hidden):
    for spec, result in zip(inputs["structures"], observations, strict=True):
        expect_no_error(result["error"], "to_device()", hints=HINTS)
        if result["changed"]:
            fail("to_device() changed the structure it was given instead of returning a new one.",
                 "build new lists, tuples and dicts and return them; never assign into `obj`.")
        _verify_nodes(spec, result["nodes"], inputs["device"])

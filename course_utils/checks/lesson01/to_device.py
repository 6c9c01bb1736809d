"""to_device(obj, device): every tensor in nested lists, tuples and dicts moved; the rest kept.

The probe builds each structure on the CPU and moves it to PyTorch's data-less 'meta' device,
which exists in every build: a real move, observable without a GPU.
"""
from __future__ import annotations

import random

from ...probe import describe_error, run_learner  # noqa: F401 (names the probe uses)
from ..framework import a, check, expect_no_error, fail

DTYPES = ("float32", "int64", "bool", "float16")
KEYS = ("inputs", "targets", "mask", "ids", "lengths", "pixels", "labels", "extra")
LEAF_TYPES = {"int": "int", "float": "float", "str": "str", "none": "NoneType", "bool": "bool",
              "ndarray": "ndarray", "tensor": "Tensor"}


def _tensor(shape, dtype="float32"):
    return {"kind": "tensor", "shape": list(shape), "dtype": dtype}


def _leaf(kind, value=None):
    return {"kind": kind, "value": value}


def _box(kind, items):
    return {"kind": kind, "items": items}


VISIBLE = [_tensor([2, 3]), _box("dict", {
    "images": _tensor([4, 3]), "labels": _tensor([4], "int64"),
    "extra": _box("tuple", [_tensor([2]), _box("list", [
        _tensor([1], "bool"), _leaf("int", 7), _leaf("str", "id-7"), _leaf("none")])]),
    "stats": {"kind": "ndarray", "shape": [3]}}), _leaf("int", 5)]


def _random(rng: random.Random, depth: int) -> dict:
    leaves = ["tensor", "tensor", "tensor", "int", "float", "str", "none", "bool", "ndarray"]
    kind = rng.choice(leaves + (["list", "tuple", "dict"] * 3 if depth else []))
    if kind == "tensor":
        return _tensor([rng.randint(1, 4) for _ in range(rng.randint(0, 2))], rng.choice(DTYPES))
    if kind == "ndarray":
        return {"kind": "ndarray", "shape": [rng.randint(1, 4)]}
    if kind in ("list", "tuple"):
        return _box(kind, [_random(rng, depth - 1) for _ in range(rng.randint(1, 3))])
    if kind == "dict":
        return _box("dict", {key: _random(rng, depth - 1) for key in rng.sample(KEYS, 2)})
    return _leaf(kind, {"int": rng.randint(-9, 99), "float": round(rng.uniform(-1, 1), 3),
                        "str": rng.choice(["cat", "id-3"]), "none": None,
                        "bool": rng.random() < 0.5}[kind])


def make_inputs(seed: int, hidden: bool) -> dict:
    if not hidden:
        return {"device": "meta", "structures": VISIBLE}
    rng = random.Random(seed)
    nested = _tensor([rng.randint(1, 3), 2], rng.choice(DTYPES))
    for kind in rng.sample(["list", "tuple", "dict"], 3):  # each container around a tensor
        items = [nested, _random(rng, 0)]
        rng.shuffle(items)
        nested = _box("dict", dict(zip(rng.sample(KEYS, 2), items, strict=True))) \
            if kind == "dict" else _box(kind, items)
    empty = _box("dict", {"nothing": _box("dict", {}), "none": _box("tuple", []),
                          "zero": _box("list", []), "value": _tensor([1], "bool")})
    return {"device": "meta", "structures": [nested, empty, _random(rng, 3), _random(rng, 3),
                                             _leaf("str", "x"), _leaf("none")]}


def probe(to_device, inputs):
    """Build each structure, call to_device(structure, 'meta'); report every node of the result
    along the expected structure, and whether the structure passed in was changed."""
    import numpy as np
    import torch

    def build(spec):
        kind = spec["kind"]
        if kind == "tensor":
            return torch.zeros(spec["shape"], dtype=getattr(torch, spec["dtype"]))
        if kind == "ndarray":
            return np.zeros(spec["shape"], dtype=np.float32)
        if kind in ("list", "tuple"):
            return {"list": list, "tuple": tuple}[kind](build(item) for item in spec["items"])
        if kind == "dict":
            return {key: build(item) for key, item in spec["items"].items()}
        return spec["value"]

    def fingerprint(value):
        if isinstance(value, torch.Tensor):
            return [str(value.device), str(value.dtype)]
        if isinstance(value, (list, tuple, dict)):
            items = value.items() if isinstance(value, dict) else enumerate(value)
            return [[str(key), id(item), fingerprint(item)] for key, item in items]
        return None

    def observe(result, spec, path, parent, out):
        node = {"path": path, "kind": spec["kind"], "parent": parent,
                "type": type(result).__name__}
        out.append(node)
        if isinstance(result, torch.Tensor):
            node.update(shape=list(result.shape), device=str(result.device),
                        dtype=str(result.dtype).replace("torch.", ""))
        elif spec["kind"] in ("list", "tuple") and isinstance(result, (list, tuple)):
            node["length"] = len(result)
            if len(result) == len(spec["items"]):
                for index, (item, item_spec) in enumerate(zip(result, spec["items"], strict=True)):
                    observe(item, item_spec, path + [index], spec["kind"], out)
        elif spec["kind"] == "dict" and isinstance(result, dict):
            node["same_keys"] = list(map(str, result)) == list(spec["items"])
            if node["same_keys"]:
                for key, item_spec in spec["items"].items():
                    observe(result[key], item_spec, path + [key], "dict", out)
        elif result is None or isinstance(result, (bool, int, float, str)):
            node["value"] = result
        return out

    results = []
    for spec in inputs["structures"]:
        original = build(spec)
        before = fingerprint(original)
        run = run_learner(to_device, original, torch.device(inputs["device"]))
        results.append({"error": run.error, "changed": fingerprint(original) != before,
                        "nodes": None if run.error else observe(run.value, spec, [], None, [])})
    return results


def _at(path: list) -> str:
    """obj['extra'][1][0] for the path ['extra', 1, 0]."""
    return "obj" + "".join(f"[{step!r}]" for step in path)


def _spec_at(spec: dict, path: list) -> dict:
    for step in path:
        spec = spec["items"][step]
    return spec


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
                 f"containers, e.g. {REBUILD['tuple']} (`type(obj)(*items)` suits namedtuples only).",
    "ValueError": "loop over a dict with `.items()` to get (key, value) pairs.",
}


def _verify_nodes(spec: dict, nodes: list, target: str) -> None:
    """Containers keep their type and size, leaves their type and value, tensors move."""
    for node in nodes:
        kind, got, where = node["kind"], node["type"], _at(node["path"])
        expected = _spec_at(spec, node["path"])
        if got == "NoneType" and kind != "none":
            fail(f"At {where}, {a(LEAF_TYPES.get(kind, kind))} came back as None.",
                 "every branch must `return` its result: `obj.to(device)` for a tensor, the new "
                 "container for a container, `obj` itself otherwise.")
        if kind in REBUILD:
            if got != kind:
                fail(f"At {where}, a {kind} came back as {a(got)}.",
                     f"rebuild a {kind} as a {kind}: {REBUILD[kind]}.")
            if not node.get("same_keys", True) or node.get("length", 0) != len(
                    expected["items"]) and kind != "dict":
                fail(f"At {where}, the {kind} came back with other items or keys.",
                     f"keep every item and key: {REBUILD[kind]}.")
        elif got != LEAF_TYPES[kind]:
            fail(f"At {where}, {a(LEAF_TYPES[kind])} came back as {a(got)}.",
                 STRING_FIX if kind == "str" else "return `obj.to(device)` for a tensor and "
                 "leave values that are not tensors untouched.")
        elif kind == "tensor" and node["dtype"] != expected["dtype"]:
            fail(f"At {where}, {a(expected['dtype'])} tensor became {node['dtype']}.",
                 "pass only the device: `obj.to(device)`; a dtype would convert every tensor.")
        elif kind == "tensor" and node["device"] != target:
            if node["parent"] is None:
                fail(f"A tensor passed on its own came back on {node['device']!r}, not on "
                     f"{target!r}, the device passed in.",
                     "return `obj.to(device)` with the `device` argument you were given; "
                     "`.to()` returns a new tensor and leaves `obj` as it was.")
            fail(f"At {where}, a tensor inside a {node['parent']} is on {node['device']!r}, "
                 f"not on {target!r}.", f"recurse into {node['parent']}s: {REBUILD[node['parent']]}.")
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

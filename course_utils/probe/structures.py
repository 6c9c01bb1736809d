"""Nested data from plain specs, and what a function returned for it, node by node.

A spec is ``{"kind": "tensor", "shape", "dtype"}``, ``{"kind": "ndarray", "shape"}``,
``{"kind": "list" | "tuple" | "dict", "items"}`` or ``{"kind": <leaf>, "value"}``. Lesson 01's
``to_device`` check builds such structures in the kernel and observes what came back.
"""


def tensor_spec(shape, dtype="float32"):
    return {"kind": "tensor", "shape": list(shape), "dtype": dtype}


def leaf_spec(kind, value=None):
    return {"kind": kind, "value": value}


def box_spec(kind, items):
    return {"kind": kind, "items": items}


def spec_at(spec, path):
    """The part of ``spec`` at ``path`` (keys and indices from the top)."""
    for step in path:
        spec = spec["items"][step]
    return spec


def build_structure(spec):
    """The value a spec describes: CPU tensors of zeros, NumPy arrays, containers, leaves."""
    import numpy as np
    import torch

    kind = spec["kind"]
    if kind == "tensor":
        return torch.zeros(spec["shape"], dtype=getattr(torch, spec["dtype"]))
    if kind == "ndarray":
        return np.zeros(spec["shape"], dtype=np.float32)
    if kind in ("list", "tuple"):
        return {"list": list, "tuple": tuple}[kind](build_structure(item)
                                                    for item in spec["items"])
    if kind == "dict":
        return {key: build_structure(item) for key, item in spec["items"].items()}
    return spec["value"]


def fingerprint(value):
    """Every container's items by identity and every tensor's device and dtype: it changes when
    the structure is changed in place."""
    import torch

    if isinstance(value, torch.Tensor):
        return [str(value.device), str(value.dtype)]
    if isinstance(value, (list, tuple, dict)):
        items = value.items() if isinstance(value, dict) else enumerate(value)
        return [[str(key), id(item), fingerprint(item)] for key, item in items]
    return None


def observe_structure(result, spec, path=None, parent=None, out=None):
    """One node per place of ``spec`` that ``result`` still has: its path, the kind expected,
    the type found, and a tensor's shape, device and dtype, a container's size or keys, a
    leaf's value. Containers of the wrong type or size are not descended into."""
    import torch

    path, out = path or [], [] if out is None else out
    node = {"path": path, "kind": spec["kind"], "parent": parent, "type": type(result).__name__}
    out.append(node)
    if isinstance(result, torch.Tensor):
        node.update(shape=list(result.shape), device=str(result.device),
                    dtype=str(result.dtype).replace("torch.", ""))
    elif spec["kind"] in ("list", "tuple") and isinstance(result, (list, tuple)):
        node["length"] = len(result)
        if len(result) == len(spec["items"]):
            for index, (item, item_spec) in enumerate(zip(result, spec["items"], strict=True)):
                observe_structure(item, item_spec, [*path, index], spec["kind"], out)
    elif spec["kind"] == "dict" and isinstance(result, dict):
        node["same_keys"] = list(map(str, result)) == list(spec["items"])
        if node["same_keys"]:
            for key, item_spec in spec["items"].items():
                observe_structure(result[key], item_spec, [*path, key], "dict", out)
    elif result is None or isinstance(result, (bool, int, float, str)):
        node["value"] = result
    return out

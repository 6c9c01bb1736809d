"""Checks for lesson 01, "Tensors and devices".

The probes move data to PyTorch's ``meta`` device (tensors with a shape and a
dtype but no values). It exists in every PyTorch build, so a real move is
observable on a machine without a GPU.
"""
from __future__ import annotations

import random

from ._core import check, expect_close, expect_no_probe_error, fail
from ._probe_support import describe, error_text

# ------------------------------------------------------------------ to_device

TENSOR_DTYPES = ("float32", "int64", "bool", "float16")
KEYS = ("inputs", "targets", "mask", "ids", "lengths", "pixels", "labels", "extra")


def _tensor(shape, dtype="float32"):
    return {"kind": "tensor", "shape": list(shape), "dtype": dtype}


def _leaf(kind, value=None):
    return {"kind": kind, "value": value}


VISIBLE_STRUCTURES = [
    _tensor([2, 3]),
    {"kind": "dict", "items": {
        "images": _tensor([4, 3]),
        "labels": _tensor([4], "int64"),
        "extra": {"kind": "tuple", "items": [
            _tensor([2]),
            {"kind": "list", "items": [_tensor([1], "bool"), _leaf("int", 7),
                                       _leaf("str", "id-7"), _leaf("none")]},
        ]},
        "stats": {"kind": "ndarray", "shape": [3]},
    }},
    _leaf("int", 5),
]


def _random_leaf(rng: random.Random) -> dict:
    kind = rng.choice(["tensor", "tensor", "tensor", "int", "float", "str", "none", "bool",
                       "ndarray"])
    if kind == "tensor":
        shape = [rng.randint(1, 4) for _ in range(rng.randint(0, 2))]
        return _tensor(shape, rng.choice(TENSOR_DTYPES))
    if kind == "ndarray":
        return {"kind": "ndarray", "shape": [rng.randint(1, 4)]}
    values = {"int": rng.randint(-9, 99), "float": round(rng.uniform(-1, 1), 3),
              "str": rng.choice(["cat", "dog", "id-3", "tokens"]), "none": None,
              "bool": rng.random() < 0.5}
    return _leaf(kind, values[kind])


def _random_structure(rng: random.Random, depth: int) -> dict:
    if depth == 0 or rng.random() < 0.3:
        return _random_leaf(rng)
    kind = rng.choice(["list", "tuple", "dict"])
    size = rng.randint(1, 3)
    if kind == "dict":
        keys = rng.sample(KEYS, size)
        return {"kind": "dict", "items": {key: _random_structure(rng, depth - 1) for key in keys}}
    return {"kind": kind, "items": [_random_structure(rng, depth - 1) for _ in range(size)]}


def _to_device_inputs(seed: int, hidden: bool) -> dict:
    if not hidden:
        return {"device": "meta", "structures": VISIBLE_STRUCTURES}
    rng = random.Random(seed)
    keys = rng.sample(KEYS, 3)
    # Every container kind holding a tensor, nested in a random order.
    kinds = ["list", "tuple", "dict"]
    rng.shuffle(kinds)
    nested = _tensor([rng.randint(1, 3), 2], rng.choice(TENSOR_DTYPES))
    for kind in kinds:
        items = [nested, _random_leaf(rng)]
        rng.shuffle(items)
        if kind == "dict":
            nested = {"kind": "dict", "items": dict(zip(keys[:2], items))}
        else:
            nested = {"kind": kind, "items": items}
    structures = [
        nested,
        {"kind": "tuple", "items": [_tensor([3], "int64"), _tensor([2, 2]), _leaf("str", "x")]},
        {"kind": "dict", "items": {keys[2]: {"kind": "list", "items": []},
                                   "empty": {"kind": "tuple", "items": []},
                                   "nothing": {"kind": "dict", "items": {}},
                                   "value": _tensor([1], "bool")}},
        _random_structure(rng, 3),
        _random_structure(rng, 3),
        _leaf("none"),
    ]
    return {"device": "meta", "structures": structures}


def probe_to_device(to_device, inputs):
    """Build each structure on the CPU, call to_device(structure, device) and report
    what came back, node by node, and whether the structure passed in was changed."""
    import numpy as np
    import torch

    target = torch.device(inputs["device"])

    def build(spec):
        kind = spec["kind"]
        if kind == "tensor":
            return torch.zeros(spec["shape"], dtype=getattr(torch, spec["dtype"]))
        if kind == "ndarray":
            return np.zeros(spec["shape"], dtype=np.float32)
        if kind == "list":
            return [build(item) for item in spec["items"]]
        if kind == "tuple":
            return tuple(build(item) for item in spec["items"])
        if kind == "dict":
            return {key: build(item) for key, item in spec["items"].items()}
        return spec["value"]

    def fingerprint(value, path, out):
        """Identity of every container's items and every tensor's device and dtype."""
        if isinstance(value, torch.Tensor):
            out.append([path, "tensor", str(value.device), str(value.dtype)])
        elif isinstance(value, (list, tuple)):
            out.append([path, type(value).__name__, [id(item) for item in value]])
            for index, item in enumerate(value):
                fingerprint(item, path + [index], out)
        elif isinstance(value, dict):
            out.append([path, "dict", [[str(key), id(item)] for key, item in value.items()]])
            for key, item in value.items():
                fingerprint(item, path + [key], out)
        return out

    def observe(result, spec, path, parent, out):
        """One fact-dict per node of the expected structure, in pre-order."""
        node = {"path": path, "kind": spec["kind"], "parent": parent,
                "type": type(result).__name__}
        out.append(node)
        if isinstance(result, torch.Tensor):
            node.update(shape=list(result.shape), dtype=str(result.dtype).replace("torch.", ""),
                        device=str(result.device))
        elif isinstance(result, np.ndarray):
            node.update(shape=list(result.shape))
        elif spec["kind"] in ("list", "tuple") and isinstance(result, (list, tuple)):
            node["length"] = len(result)
            if len(result) == len(spec["items"]):
                for index, (item, item_spec) in enumerate(zip(result, spec["items"])):
                    observe(item, item_spec, path + [index], spec["kind"], out)
        elif spec["kind"] == "dict" and isinstance(result, dict):
            node["keys"] = [str(key) for key in result]
            if node["keys"] == list(spec["items"]):
                for key, item_spec in spec["items"].items():
                    observe(result[key], item_spec, path + [key], "dict", out)
        elif result is None or isinstance(result, (bool, int, float, str)):
            node["value"] = result
        return out

    results = []
    for spec in inputs["structures"]:
        original = build(spec)
        before = fingerprint(original, [], [])
        try:
            result = to_device(original, target)
        except Exception as error:  # report the learner's error to verify()
            results.append({"error": error_text(error)})
            continue
        after = fingerprint(original, [], [])
        changed = [b[0] for b, a in zip(before, after) if b != a]
        results.append({"nodes": observe(result, spec, [], None, []), "changed": changed})
    return {"results": results}


def _a(noun: str) -> str:
    """'a list', 'an int', and 'None' for the type of None."""
    if noun == "NoneType":
        return "None"
    if noun == "ndarray":
        return "a NumPy array"
    return f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"


def _where(path: list) -> str:
    """Render a path like ['extra', 1, 0] as obj['extra'][1][0]."""
    return "obj" + "".join(f"[{step!r}]" for step in path)


CONTAINER_FIX = {
    "tuple": "rebuild a tuple as a tuple: `tuple(to_device(item, device) for item in obj)`.",
    "list": "rebuild a list as a list: `[to_device(item, device) for item in obj]`.",
    "dict": "rebuild a dict with the same keys: "
            "`{key: to_device(value, device) for key, value in obj.items()}`.",
}

RECURSE_FIX = {
    "tuple": "recurse into tuples: `tuple(to_device(item, device) for item in obj)`.",
    "list": "recurse into lists: `[to_device(item, device) for item in obj]`.",
    "dict": "recurse into dicts: "
            "`{key: to_device(value, device) for key, value in obj.items()}`.",
}


STRING_FIX = ("a string is a sequence too: recurse only into list, tuple and dict, and return "
              "every other value unchanged.")


def _to_device_error_hint(error: str) -> str:
    if "has no attribute 'to'" in error:
        return ("only tensors have `.to()`: test `isinstance(obj, torch.Tensor)` first and "
                "return anything that is not a tensor, list, tuple or dict unchanged.")
    if "does not support item assignment" in error:
        return "don't assign into the structure you were given: build and return new containers."
    if "RecursionError" in error:
        return STRING_FIX
    if "expected at most 1 argument" in error:
        return ("`type(obj)(*items)` is right for a namedtuple only; a plain tuple takes one "
                "iterable: `tuple(items)`.")
    if "unpack" in error:
        return "loop over a dict with `.items()` to get (key, value) pairs."
    return "call to_device() on a small nested structure in a new cell and read the traceback."


def _spec_at(spec: dict, path: list) -> dict:
    for step in path:
        spec = spec["items"][step]
    return spec


LEAF_TYPES = {"int": "int", "float": "float", "str": "str", "none": "NoneType", "bool": "bool",
              "ndarray": "ndarray", "tensor": "Tensor"}


def _expect_same_types(spec: dict, nodes: list) -> None:
    """Every container keeps its type and length or keys; every leaf stays what it was."""
    for node in nodes:
        kind, got, where = node["kind"], node["type"], _where(node["path"])
        if got == "NoneType" and not node["path"] and kind != "none":
            fail("to_device() returned None.",
                 "every branch must `return` its result: `return obj.to(device)` for a tensor, "
                 "the new container for a container, `obj` itself otherwise.")
        if kind in ("list", "tuple", "dict"):
            if got != kind:
                fail(f"At {where}, a {kind} came back as {_a(got)}.", CONTAINER_FIX[kind])
            if kind == "dict" and "keys" not in node:
                fail(f"At {where}, the dict came back with other keys.",
                     "keep every key as it is: `{key: ... for key, value in obj.items()}`.")
            expected_length = len(_spec_at(spec, node["path"])["items"])
            if kind != "dict" and node["length"] != expected_length:
                fail(f"At {where}, the {kind} came back with {node['length']} items instead of "
                     f"{expected_length}.", CONTAINER_FIX[kind])
        elif kind == "tensor":
            if got != "Tensor":
                fail(f"At {where}, a tensor came back as {_a(got)}.",
                     "return `obj.to(device)` for a tensor.")
        elif got != LEAF_TYPES[kind]:
            fail(f"At {where}, {_a(LEAF_TYPES[kind])} came back as {_a(got)}.",
                 STRING_FIX if kind == "str" else
                 "leave values that are not tensors untouched: return them as they are.")


def _verify_structure(spec: dict, result: dict, target: str) -> None:
    if "error" in result:
        error = result["error"]
        if error.startswith("NotImplementedError") and "meta" not in error:
            expect_no_probe_error({"probe_error": error}, "to_device()")
        fail(f"to_device() raised {error.rstrip('.')}.", _to_device_error_hint(error))
    if result["changed"]:
        fail(f"to_device() changed the structure it was given (at "
             f"{_where(result['changed'][0])}) instead of "
             "returning a new one.",
             "build new lists, tuples and dicts and return them; never assign into `obj`.")
    nodes = result["nodes"]
    _expect_same_types(spec, nodes)
    tensors = [node for node in nodes if node["kind"] == "tensor"]
    for node in tensors:  # shape and dtype: a move changes neither
        expected = _spec_at(spec, node["path"])
        if node["shape"] != expected["shape"]:
            fail(f"At {_where(node['path'])}, the tensor's shape changed to "
                 f"{tuple(node['shape'])}.", "only move the tensor: `obj.to(device)`.")
        if node["dtype"] != expected["dtype"]:
            fail(f"At {_where(node['path'])}, {_a(expected['dtype'])} tensor became "
                 f"{node['dtype']}.",
                 "pass only the device: `obj.to(device)`; a dtype would convert every tensor.")
    stayed = [node for node in tensors if node["device"] != target]
    if stayed:
        node = stayed[0]
        if node["parent"] is None:
            fail(f"A tensor passed on its own came back on {node['device']!r}, not {target!r}.",
                 "return `obj.to(device)` with the `device` argument you were given; `.to()` "
                 "returns a new tensor and leaves `obj` as it was.")
        fail(f"At {_where(node['path'])}, a tensor inside a {node['parent']} is on "
             f"{node['device']!r}, not {target!r}.", RECURSE_FIX[node["parent"]])
    for node in nodes:  # the other leaves keep their values
        if "value" in node and node["value"] != _spec_at(spec, node["path"]).get("value"):
            fail(f"At {_where(node['path'])}, {_a(node['type'])} value was changed.",
                 STRING_FIX if node["kind"] == "str" else
                 "return values that are not tensors unchanged.")


@check(success="to_device() moves every tensor in nested tuples, lists and dicts and keeps "
               "everything else as it was.",
       make_inputs=_to_device_inputs, probe=probe_to_device)
def check_to_device(inputs, observations):
    expect_no_probe_error(observations, "to_device()")
    if len(observations["results"]) != len(inputs["structures"]):
        fail("The probe did not report on every structure.", "run the check again.")
    for spec, result in zip(inputs["structures"], observations["results"]):
        _verify_structure(spec, result, inputs["device"])


# ------------------------------------------------------------------ predict

def _predict_inputs(seed: int, hidden: bool) -> dict:
    rng = random.Random(seed + 1 if hidden else 0)
    if hidden:
        sizes = {"d": rng.randint(2, 5), "h": rng.randint(3, 6), "o": rng.randint(1, 3),
                 "batch": rng.randint(1, 4)}
    else:
        sizes = {"d": 3, "h": 4, "o": 2, "batch": 2}

    def matrix(rows, cols):
        return [[round(rng.uniform(-1, 1), 2) for _ in range(cols)] for _ in range(rows)]

    return dict(sizes, hidden=hidden,
                w1=matrix(sizes["h"], sizes["d"]), b1=matrix(1, sizes["h"])[0],
                w2=matrix(sizes["o"], sizes["h"]), b2=matrix(1, sizes["o"])[0],
                x=matrix(sizes["batch"], sizes["d"]))


def probe_predict(predict, inputs):
    """Call predict() twice: with a CPU model (to compare its result with the model's own
    outputs) and with a model on the meta device whose forward() records the device of
    the inputs it receives, then stops."""
    import torch

    d, h, o = inputs["d"], inputs["h"], inputs["o"]

    # 1. A CPU model: predict() must return the model's outputs, on the CPU, without autograd.
    model = torch.nn.Sequential(torch.nn.Linear(d, h), torch.nn.ReLU(), torch.nn.Linear(h, o))
    with torch.no_grad():
        for layer, weight, bias in ((model[0], "w1", "b1"), (model[2], "w2", "b2")):
            layer.weight.copy_(torch.tensor(inputs[weight]))
            layer.bias.copy_(torch.tensor(inputs[bias]))
    x = torch.tensor(inputs["x"])
    x_before = x.clone()
    try:
        on_cpu = {"result": describe(predict(model, x))}
    except Exception as error:  # report the learner's error to verify()
        on_cpu = {"error": error_text(error)}
    on_cpu["inputs_unchanged"] = bool(x.device.type == "cpu" and torch.equal(x, x_before))

    # 2. A model on "meta": where do the inputs reach forward(), and do the outputs come back?
    class Stop(Exception):
        """Ends the call early: forward() got inputs on the wrong device, or the outputs
        were sent to the CPU (a meta tensor has no values to copy)."""

    seen, moves, applied, returned_to = [], [], [], []

    class Watched(torch.Tensor):
        """Inputs that record the device each .to() call returns."""

        def to(self, *args, **kwargs):
            moved = super().to(*args, **kwargs)
            moves.append(str(moved.device))
            return moved

    class Output(torch.Tensor):
        """Outputs that record where .cpu() or .to() sends them."""

        def cpu(self, *args, **kwargs):
            returned_to.append("cpu")
            raise Stop()

        def to(self, *args, **kwargs):
            targets = [kwargs.get("device")] + list(args)
            for target in targets:
                if isinstance(target, (str, torch.device)):
                    returned_to.append(str(torch.device(target)))
                elif isinstance(target, torch.Tensor):
                    returned_to.append(str(target.device))
            if returned_to and returned_to[-1] == "cpu":
                raise Stop()
            return super().to(*args, **kwargs)

    class OnMeta(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(d, o, device="meta")

        def forward(self, batch):
            seen.append(str(batch.device) if isinstance(batch, torch.Tensor)
                        else type(batch).__name__)
            if seen[-1] != "meta":
                raise Stop()  # the real layer would fail here with a device mismatch
            return self.layer(batch).as_subclass(Output)

        def _apply(self, *args, **kwargs):  # Module.to(), .cpu(), .cuda() go through here
            applied.append(True)
            return super()._apply(*args, **kwargs)

    meta_model = OnMeta()
    on_meta = {"error": None, "result": None}
    try:
        on_meta["result"] = describe(
            predict(meta_model, torch.tensor(inputs["x"]).as_subclass(Watched)))
    except Stop:
        pass
    except Exception as raised:  # report the learner's error to verify()
        on_meta["error"] = f"{type(raised).__name__}: {raised}"
    on_meta.update(seen=seen, moves=moves, model_moved=bool(applied), returned_to=returned_to,
                   model_devices=sorted({str(p.device) for p in meta_model.parameters()}))
    return {"cpu": on_cpu, "meta": on_meta}


def _reference_outputs(inputs: dict) -> list[list[float]]:
    """relu(x @ w1.T + b1) @ w2.T + b2, in plain Python."""
    def linear(rows, weight, bias):
        return [[sum(r * w for r, w in zip(row, weights)) + b for weights, b in zip(weight, bias)]
                for row in rows]

    hidden = [[max(value, 0.0) for value in row]
              for row in linear(inputs["x"], inputs["w1"], inputs["b1"])]
    return linear(hidden, inputs["w2"], inputs["b2"])


def _predict_error_hint(error: str) -> str:
    if "has no attribute 'weight'" in error or "has no attribute 'device'" in error:
        return ("not every model has `.weight` or `.device`: ask its parameters, "
                "`next(model.parameters()).device`.")
    if "CUDA" in error:
        return ("don't name a device in predict(): use the model's own device, "
                "`next(model.parameters()).device`.")
    if "numpy" in error and "requires grad" in error:
        return ("return a tensor, `outputs.cpu()`, computed inside `with torch.no_grad():`; "
                "the caller converts it to NumPy if it needs to.")
    return "call predict(model, inputs) on a small model in a new cell and read the traceback."


MOVE_INPUTS = ("predict() must not move the model (its caller decided where it lives): "
               "move the inputs to it instead, "
               "`inputs = inputs.to(next(model.parameters()).device)`.")


@check(success="predict() runs the model where it lives and returns its outputs on the CPU.",
       make_inputs=_predict_inputs, probe=probe_predict)
def check_predict(inputs, observations):
    expect_no_probe_error(observations, "predict()")
    on_cpu, on_meta = observations["cpu"], observations["meta"]
    where = "With a model and inputs on the CPU"
    if "error" in on_cpu:
        error = on_cpu["error"]
        if error.startswith("NotImplementedError") and "meta" not in error:
            expect_no_probe_error({"probe_error": error}, "predict()")
        fail(f"{where}, predict() raised {error.rstrip('.')}.", _predict_error_hint(error))
    result = on_cpu["result"]
    if result["type"] != "Tensor":
        hint = ("return a tensor: `outputs.cpu()`; the caller can call `.numpy()` on it."
                if result["type"] in ("ndarray", "list", "float") else
                "return the model's outputs: `return outputs.cpu()`.")
        fail(f"{where}, predict() returned {_a(result['type'])}, not a tensor.", hint)
    expected_shape = [inputs["batch"], inputs["o"]]
    if result["shape"] != expected_shape:
        fail(f"{where}, predict() returned shape {tuple(result['shape'])}, not "
             f"{tuple(expected_shape)} (batch, outputs).",
             "return the model's outputs as they come, only moved to the CPU.")
    if result["dtype"] != "float32":
        fail(f"{where}, predict() returned {result['dtype']} outputs.",
             "don't convert the outputs: only move them, with `.cpu()`.")
    if result["device"] != "cpu":
        fail(f"{where}, predict() returned outputs on {result['device']!r}.",
             "return `outputs.cpu()`: the caller wants them on the CPU.")
    if result["requires_grad"] or result["has_grad_fn"]:
        fail(f"{where}, predict() returned outputs still attached to the autograd graph "
             "(requires_grad=True), so `.numpy()` on them fails and memory is kept for a "
             "backward pass that never comes.",
             "run the model inside `with torch.no_grad():` (or return `outputs.detach().cpu()`).")
    for row, (got_row, expected_row) in enumerate(
            zip(_rows(result["values"], inputs["o"]), _reference_outputs(inputs))):
        for column, (got, expected) in enumerate(zip(got_row, expected_row)):
            expect_close(got, expected, f"{where}, output [{row}, {column}]",
                         "return `model(inputs)`, unchanged apart from the move to the CPU.",
                         rel=1e-4, abs_tol=1e-5, reveal=not inputs["hidden"])
    if not on_cpu["inputs_unchanged"]:
        fail(f"{where}, predict() changed the inputs tensor it was given.",
             "don't modify `inputs` in place: `inputs = inputs.to(device)` makes a new name.")

    where = "With a model on the 'meta' device"
    seen, moves = on_meta["seen"], on_meta["moves"]
    if on_meta["error"] is not None:
        error = on_meta["error"]
        if on_meta["model_moved"]:
            fail(f"{where}, predict() tried to move the model and raised "
                 f"{error.rstrip('.')}.", MOVE_INPUTS)
        fail(f"{where}, predict() raised {error.rstrip('.')}.", _predict_error_hint(error))
    if not seen:
        fail(f"{where}, predict() never called the model (or swallowed its exception).",
             "call `model(inputs)` and let exceptions through.")
    if on_meta["model_devices"] != ["meta"]:
        fail(f"{where}, predict() moved the model to {on_meta['model_devices']}.", MOVE_INPUTS)
    if seen[0] != "meta":
        if moves and seen[0] not in moves:
            fail(f"{where}, predict() called `inputs.to(...)`, but the model still received "
                 f"inputs on {seen[0]!r}.",
                 "`inputs.to(device)` returns a new tensor: assign it, "
                 "`inputs = inputs.to(device)`.")
        if moves:
            fail(f"{where}, predict() moved the inputs to {moves[-1]!r}, but the model is on "
                 "'meta'.",
                 "ask the model where it lives instead of choosing a device: "
                 "`inputs = inputs.to(next(model.parameters()).device)`.")
        fail(f"{where}, the model received inputs on {seen[0]!r}: predict() did not move them.",
             "move the inputs to the model's device before calling it: "
             "`inputs = inputs.to(next(model.parameters()).device)`.")
    if "cpu" not in on_meta["returned_to"]:
        result = on_meta["result"] or {}
        fail(f"{where}, predict() returned the outputs on {result.get('device')!r}, the "
             "model's device, instead of bringing them back to the CPU.",
             "return `outputs.cpu()`.")


def _rows(values: list[float], width: int) -> list[list[float]]:
    return [values[start:start + width] for start in range(0, len(values), width)]


# ------------------------------------------------------------------ on_gpu

LINES = "abcdefgh"
ON_GPU = {"a": False, "b": True, "c": False, "d": True, "e": True, "f": True, "g": False,
          "h": True}
WHY = {  # shown for the visible lines a-d: why that line's behaviour matters
    "a": "`x.to(device)` returns a new tensor on the GPU and leaves `x` where it was; that new "
         "tensor was thrown away. This is the classic bug: write `x = x.to(device)`.",
    "b": "`Module.to()` moves the module's parameters in place (and returns the same module), "
         "so the model is on the GPU although the result was not assigned.",
    "c": "the GPU copy is called `y`; `.to()` never changes the tensor it is called on, so `x` "
         "is where it was.",
    "d": "`device=` creates the tensor directly on the GPU: no CPU tensor, no copy.",
}
HINTS = {  # for the hidden lines e-h: a nudge that does not give the answer away
    "e": "ask where an operation puts its result when its inputs are on one device.",
    "f": "ask whether changing a tensor's dtype also changes its device.",
    "g": "ask what type of object `.item()` returns.",
    "h": "ask what `.cuda()` does and what the assignment does with its result.",
}


def _on_gpu_inputs(seed: int, hidden: bool) -> dict:
    return {"hidden": hidden, "lines": list(LINES if hidden else LINES[:4])}


def probe_on_gpu(on_gpu, inputs):
    """Describe the learner's dict of predictions."""
    return describe(on_gpu)


@check(success="Your predictions for the lines checked here are right.",
       make_inputs=_on_gpu_inputs, probe=probe_on_gpu)
def check_on_gpu(inputs, observations):
    expect_no_probe_error(observations, "on_gpu")
    if observations["type"] != "dict":
        fail(f"on_gpu should be a dict, but it is a {observations['type']}.",
             'write `on_gpu = {"a": True, "b": False, ...}` with one entry per line a to h.')
    answers = observations["items"]
    if sorted(answers) != list(LINES):
        missing = sorted(set(LINES) - set(answers))
        extra = sorted(set(answers) - set(LINES))
        fail(f"on_gpu should have the keys 'a' to 'h'; missing {missing}, unexpected {extra}.",
             "use the lowercase line labels as keys, one entry per line.")
    for line in LINES:
        if answers[line]["type"] != "bool":
            fail(f"on_gpu[{line!r}] is a {answers[line]['type']}, not True or False.",
                 "answer each line with the bool True or False (no quotes).")
    for line in inputs["lines"]:
        if answers[line]["value"] != ON_GPU[line]:
            if line in HINTS:
                fail(f"Your prediction for line {line} is not right.", HINTS[line])
            fail(f"Your prediction for line {line} is not right: {WHY[line]}",
                 f"change on_gpu[{line!r}] and re-read the rule for that line.")

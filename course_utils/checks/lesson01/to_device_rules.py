"""to_device()'s rules on the trusted side: what each node of the result must be, and
the message for the first that is not (where it is, what came back, what the probe saw
of the containers returned as passed in)."""
from __future__ import annotations

from ...probe import ErrorFacts
from ...probe.structures import spec_at
from ..framework import Hint, a, error_summary, fail, is_stub, where_in_code

LEAF_TYPES = {"int": "int", "float": "float", "str": "str", "none": "NoneType", "bool": "bool",
              "ndarray": "ndarray", "tensor": "Tensor"}


def _at(path: list) -> str:
    """obj['extra'][1][0] for the path ['extra', 1, 0]."""
    return "obj" + "".join(f"[{step!r}]" for step in path)


REBUILD = {"tuple": "`tuple(to_device(item, device) for item in obj)`",
           "list": "`[to_device(item, device) for item in obj]`",
           "dict": "`{key: to_device(value, device) for key, value in obj.items()}`"}
STRING_FIX = ("a string is a sequence too: recurse only into list, tuple and dict, and return "
              "every other value unchanged.")


def _verify_container(node: dict, expected: dict, where: str) -> None:
    kind, got = node["kind"], node["type"]
    if got != kind:
        fail(f"At {where}, a {kind} came back as {a(got)}.",
             f"rebuild a {kind} as a {kind}: {REBUILD[kind]}.")
    if not node.get("same_keys", True) or (kind != "dict"
                                           and node.get("length", 0) != len(expected["items"])):
        fail(f"At {where}, the {kind} came back with other items or keys.",
             f"keep every item and key: {REBUILD[kind]}.")


def _verifytensor_spec(node: dict, expected: dict, where: str, target: str,
                       kept: str = "") -> None:
    """``kept``: the container around the tensor that came back as the object passed in."""
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
         f"not on {target!r}, the device passed in" + (
             f": to_device() returned {kept} itself, the very object it was given, so nothing "
             "inside it moved." if kept else "."), f"recurse into {parent}s: {REBUILD[parent]}.")


def verify_nodes(spec: dict, nodes: list, target: str, as_is: list, alone: str) -> None:
    """Containers keep their type and size, leaves their type and value, tensors move;
    ``as_is``: the paths of containers returned as passed in; ``alone``: a leaf that
    to_device() returned None for when passed on its own (or "")."""
    for node in nodes:
        kind, got, where = node["kind"], node["type"], _at(node["path"])
        expected = spec_at(spec, node["path"])
        if got == "NoneType" and kind != "none":
            fail(f"At {where}, {a(LEAF_TYPES.get(kind, kind))} came back as None" + (
                 f", and to_device({alone}, device) on its own returned None"
                 if alone and kind not in REBUILD else "") + ".",
                 "every branch must `return` its result: `obj.to(device)` for a tensor, the new "
                 "container for a container, `obj` itself otherwise.")
        if kind in REBUILD:
            _verify_container(node, expected, where)
        elif got != LEAF_TYPES[kind]:
            fail(f"At {where}, {a(LEAF_TYPES[kind])} came back as {a(got)}.",
                 STRING_FIX if kind == "str" else "return `obj.to(device)` for a tensor and "
                 "leave values that are not tensors untouched.")
        elif kind == "tensor":
            kept = next((path for path in as_is if node["path"][:len(path)] == path), None)
            _verifytensor_spec(node, expected, where, target, "" if kept is None else
                               f"the {spec_at(spec, kept)['kind']} {_at(kept)}")
        elif "value" in node and node["value"] != expected.get("value"):
            fail(f"At {where}, {a(got)} value was changed.",
                 STRING_FIX if kind == "str" else "return values that are not tensors unchanged.")


def fail_in_call(error: ErrorFacts, call: dict, hints: dict[str, Hint]) -> None:
    """An error, with what the innermost call of to_device() it passed through was given:
    a value that is no container, or a plain tuple where a namedtuple's rebuild was used."""
    given = call["type"] if call["module"] == "builtins" else f"{call['module']}.{call['type']}"
    seen = (f"{a(given)}, which is not a list, tuple or dict" if call["container"] is None else
            f"a plain {call['container']}" + (
                ", not a namedtuple (it has no `_fields`)" if call["container"] == "tuple" and
                not call["namedtuple"] else ""))
    if is_stub(error):
        return
    fixes = [hint(error) if callable(hint) else hint
             for hint in (hints.get(kind) for kind in error["kinds"]) if hint]
    fail(f"to_device() raised {error_summary(error)}{where_in_code(error)}, in the call "
         f"to_device({call['argument']}, ...) given {seen}.",
         next((fix for fix in fixes if fix), "call to_device() on a small input in a new cell "
              "and read the traceback."))

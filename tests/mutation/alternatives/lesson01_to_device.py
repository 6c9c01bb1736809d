"""Right alternatives: imported from tests/checks/lesson01/test_to_device.py, and own."""
from __future__ import annotations

import torch

from ...checks.lesson01.test_to_device import to_device_type_preserving


def to_device_match(obj, device):
    """Own: structural pattern matching."""
    match obj:
        case torch.Tensor():
            return obj.to(device)
        case dict():
            return {k: to_device_match(v, device) for k, v in obj.items()}
        case list():
            return [to_device_match(v, device) for v in obj]
        case tuple() if hasattr(obj, "_fields"):
            return type(obj)(*(to_device_match(v, device) for v in obj))
        case tuple():
            return tuple(to_device_match(v, device) for v in obj)
    return obj


def to_device_with_map(obj, device):
    """Own: map() and a namedtuple's _make()."""
    def move(item):
        return to_device_with_map(item, device)
    if isinstance(obj, torch.Tensor):
        return obj.to(device, non_blocking=False)
    if isinstance(obj, dict):
        return dict(zip(obj.keys(), map(move, obj.values()), strict=True))
    if isinstance(obj, list):
        return list(map(move, obj))
    if isinstance(obj, tuple):
        return obj._make(map(move, obj)) if hasattr(obj, "_make") else tuple(map(move, obj))
    return obj


def to_device_with_pytree(obj, device):
    """Own: torch's pytree utilities map every tensor leaf (namedtuples included)."""
    from torch.utils import _pytree

    return _pytree.tree_map(lambda leaf: leaf.to(device) if isinstance(leaf, torch.Tensor)
                            else leaf, obj)


def to_device_iterative_dispatch(obj, device):
    """Own: a table of handlers by type."""
    handlers = {
        dict: lambda o: {k: to_device_iterative_dispatch(v, device) for k, v in o.items()},
        list: lambda o: [to_device_iterative_dispatch(v, device) for v in o],
    }
    if torch.is_tensor(obj):
        return obj.to(device)
    for kind, handler in handlers.items():
        if isinstance(obj, kind):
            return handler(obj)
    if isinstance(obj, tuple):
        items = [to_device_iterative_dispatch(v, device) for v in obj]
        return type(obj)(*items) if hasattr(obj, "_fields") else tuple(items)
    return obj


ALTERNATIVES = [to_device_type_preserving, to_device_match, to_device_with_map,
                to_device_with_pytree, to_device_iterative_dispatch]

"""Small measurements the lessons show: what autograd keeps alive, and for how long.

* :class:`SavedTensors` -- THE measurement of what autograd saves for backward: a ``with``
  block that records every tensor autograd saves for a backward pass (the activations) and
  tells how many bytes that was and, at any moment later, how many of them are still held.
  :func:`course_utils.lab.memory.saved_for_backward` is its one-call form. ``backward()``
  releases them; a graph that nobody runs backward through keeps them as long as something
  refers to it.
* :func:`graph_nodes` -- how many autograd nodes a tensor's graph holds: the bookkeeping that
  stays in host memory even after ``backward()`` has freed the saved tensors.

They work on every device (CPU, CUDA, MPS). On a CUDA GPU, ``torch.cuda.memory_allocated()``
gives the same picture as device memory.
"""
from __future__ import annotations

import weakref
from collections.abc import Iterable

import torch
from typing_extensions import Self

__all__ = ["SavedTensors", "graph_nodes"]


def _storage_key(tensor: torch.Tensor) -> tuple[str, int]:
    return str(tensor.device), tensor.untyped_storage().data_ptr()


class _Packed:
    """What autograd keeps for one saved tensor while the hooks are active."""

    __slots__ = ("__weakref__", "tensor")

    def __init__(self, tensor: torch.Tensor) -> None:
        self.tensor = tensor


class SavedTensors:
    """Record what autograd saves for backward inside the block; report what is still held.

    ::

        with SavedTensors(exclude=model.parameters()) as saved:
            loss = loss_fn(model(x), y)
        saved.bytes_alive      # the activations this graph keeps for backward
        loss.backward()
        saved.bytes_alive      # 0: backward released them

    The counting rule: the bytes of each distinct STORAGE, each counted once. A view keeps its
    whole storage alive, so that is the memory the graph holds: a slice of a batch holds the
    batch, and a tensor saved by two operations (one layer's output is the next one's input)
    is held once. Tensors that share storage with ``exclude`` (the model's parameters, a data
    set already in memory: things that exist anyway) are not counted as saved; their bytes
    are in ``bytes_excluded``. A copy autocast makes of a weight is new memory: it counts.
    Only one such block can be active at a time (PyTorch allows one pair of saved-tensor hooks).
    """

    def __init__(self, exclude: Iterable[torch.Tensor] = ()) -> None:
        self._excluded = {_storage_key(tensor): tensor.untyped_storage().nbytes()
                          for tensor in exclude}
        self._excluded_seen: set[tuple[str, int]] = set()
        self._held: dict[tuple[str, int], list[int]] = {}  # key -> [bytes, holders alive]
        self._hooks: torch.autograd.graph.saved_tensors_hooks | None = None
        self.tensors_saved = 0  # how many tensors were saved inside the block, in all
        self.storages_saved = 0  # how many distinct storages they were in
        self.bytes_saved = 0  # those storages' bytes, in all

    @property
    def bytes_excluded(self) -> int:
        """Bytes of the ``exclude`` storages that were saved (each once): held, not new."""
        return sum(self._excluded[key] for key in self._excluded_seen)

    @property
    def storages_excluded(self) -> int:
        """How many distinct ``exclude`` storages were saved."""
        return len(self._excluded_seen)

    @property
    def bytes_alive(self) -> int:
        """Bytes of saved storages that some graph still holds right now."""
        return sum(nbytes for nbytes, holders in self._held.values() if holders)

    @property
    def tensors_alive(self) -> int:
        """How many saved tensors some graph still holds right now."""
        return sum(holders for _, holders in self._held.values())

    def _pack(self, tensor: torch.Tensor) -> torch.Tensor | _Packed:
        if tensor.device.type == "meta":  # no memory, no address to tell storages apart
            return tensor
        key = _storage_key(tensor)
        if key in self._excluded:
            self._excluded_seen.add(key)
            return tensor
        entry = self._held.get(key)
        if entry is None or not entry[1]:
            entry = self._held[key] = [tensor.untyped_storage().nbytes(), 0]
            self.bytes_saved += entry[0]
            self.storages_saved += 1
        entry[1] += 1
        self.tensors_saved += 1
        packed = _Packed(tensor.detach())  # no grad_fn: no reference cycle through the graph
        weakref.finalize(packed, self._release, key)
        return packed

    def _release(self, key: tuple[str, int]) -> None:
        entry = self._held.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] <= 0:
                del self._held[key]  # the address may be reused by a new storage

    @staticmethod
    def _unpack(packed: torch.Tensor | _Packed) -> torch.Tensor:
        return packed.tensor if isinstance(packed, _Packed) else packed

    def __enter__(self) -> Self:
        self._hooks = torch.autograd.graph.saved_tensors_hooks(self._pack, self._unpack)
        self._hooks.__enter__()
        return self

    def __exit__(self, *exc_info: object) -> None:
        hooks, self._hooks = self._hooks, None
        if hooks is not None:
            hooks.__exit__(*exc_info)


def graph_nodes(tensor: torch.Tensor | float) -> int:
    """How many autograd nodes ``tensor``'s graph holds (0 for a float or a detached tensor).

    Each node is autograd's record of one operation. ``backward()`` frees the tensors the
    nodes saved, not the nodes: they live, in host memory, as long as a tensor refers to them.
    """
    root = getattr(tensor, "grad_fn", None)
    if root is None:
        return 0
    seen, stack = {root}, [root]
    while stack:
        node = stack.pop()
        for parent, _ in node.next_functions:
            if parent is not None and parent not in seen:
                seen.add(parent)
                stack.append(parent)
    return len(seen)

"""What makes the host wait for the device: the one table, and the counter probes use.

A check judges what the learner's code would make a GPU do, also on a grader without one. On a
CPU a device read is often no copy at all (``loss.cpu()`` returns ``loss``), so counting what
the grader's CPU dispatches misses it; the counter here judges each call by its meaning instead,
from :data:`HOST_READS`: every way a device value reaches Python or host memory, or decides a
result's shape. The table holds, beside each spelling, what it does on CUDA under
``torch.cuda.set_sync_debug_mode("error")`` and where PyTorch (or CUDA) documents it;
``pytest -m gpu`` runs every example there (tests/test_syncs.py). Where the debug mode and the
meaning disagree, the entry says why (the mode "is experimental, not all synchronizing
operations will trigger warning or error": ``torch.cuda.set_sync_debug_mode``'s docstring).

* :data:`HOST_READS` -- the table, :class:`HostRead` entries;
* :func:`read_by` -- whether one torch call reads a device value (the entry that says so);
* :func:`host_read_counter` -- a torch function mode that logs each read while active.

Sources named in the table: [sem] CUDA semantics, "Asynchronous execution"
(https://docs.pytorch.org/docs/stable/notes/cuda.html#asynchronous-execution); [mode]
``torch.cuda.set_sync_debug_mode`` (torch/cuda/__init__.py); [c10] c10/cuda/CUDAFunctions.h,
``memcpy_and_sync`` and ``stream_synchronize``, the two calls that check the mode; [scalar]
aten/src/ATen/native/cuda/CUDAScalar.cu, ``_local_scalar_dense_cuda`` (``memcpy_and_sync``);
[copy] aten/src/ATen/native/cuda/Copy.cu, ``copy_kernel_cuda`` (blocking: ``memcpy_and_sync``;
``non_blocking``: ``cudaMemcpyAsync`` alone); [api] CUDA runtime API, "API synchronization
behavior" (https://docs.nvidia.com/cuda/cuda-runtime-api/api-sync-behavior.html).
"""
from collections.abc import Callable
from typing import NamedTuple


class HostRead(NamedTuple):
    """One spelling, what it does, and where that is written down."""

    spelling: str  # as a learner writes it, for messages and docs
    op: str  # the name of the torch function a mode sees (``func.__name__``)
    when: str  # the condition that makes that call a read: a key of _CONDITIONS, or "-"
    reads: bool  # a device value reaches the host: probes count it
    cuda: str  # under set_sync_debug_mode("error"): "raises", "silent" or "refuses" (TypeError)
    source: str
    example: Callable  # example(o): the spelling on operands (tests/test_syncs.py's Operands)
    note: str = ""  # why `cuda` is not what `reads` implies, where it is not


# Operands of the examples: o.loss (0-dim float), o.x (float vector), o.mask (bool vector),
# o.flag (0-dim bool), o.index and o.counts (int64 vectors), o.host (a float CPU tensor in
# pageable memory), o.device (the device), o.sink (a text stream for print).
HOST_READS = (
    # ---- a device value becomes a Python object: _local_scalar_dense ([scalar])
    HostRead("loss.item()", "item", "always", True, "raises",
             "Tensor.item docs; [sem]; [scalar]", lambda o: o.loss.item()),
    HostRead("float(loss)", "__float__", "always", True, "raises",
             "Tensor.__float__ -> item ([scalar])", lambda o: float(o.loss)),
    HostRead("int(count)", "__int__", "always", True, "raises",
             "Tensor.__int__ -> item ([scalar])", lambda o: int(o.index[0])),
    HostRead("bool(flag), `if flag:`, `not flag`, `and`/`or`", "__bool__", "always", True,
             "raises", "Tensor.__bool__ -> item ([scalar])", lambda o: 1 if o.flag else 0),
    HostRead("`if loss > 0:` (a comparison in control flow)", "__bool__", "always", True,
             "raises", "the comparison is a device tensor, `if` calls its __bool__ ([scalar])",
             lambda o: 1 if o.loss > 0 else 0),
    HostRead("range(n), items[n] (n a device integer)", "__index__", "always", True, "raises",
             "Tensor.__index__ -> item ([scalar])", lambda o: [0, 1, 2, 3][o.index[1]]),
    HostRead("value in tensor", "__contains__", "always", True, "raises",
             "Tensor.__contains__ (torch/_tensor.py): (element == self).any().item()",
             lambda o: 0.5 in o.x),
    HostRead("loss.tolist()", "tolist", "always", True, "raises",
             "Tensor.tolist docs; torch/csrc/utils/tensor_list.cpp copies to the CPU ([copy])",
             lambda o: o.x.tolist()),
    HostRead("torch.equal(a, b)", "equal", "two operands", True, "raises",
             "torch.equal returns a Python bool: eq(...).all().item() on CUDA ([scalar])",
             lambda o: torch_module(o).equal(o.x, o.x.clone())),  # not x, x: an alias is equal
    HostRead("torch.allclose(a, b)", "allclose", "two operands", True, "raises",
             "torch.allclose returns a Python bool: isclose(...).all().item() ([scalar])",
             lambda o: torch_module(o).allclose(o.x, o.x.clone())),
    # ---- printing and formatting read every value shown
    HostRead("print(loss), str(loss), repr(loss)", "__repr__", "always", True, "raises",
             "torch/_tensor_str.py formats host values (.item(), masked_select)",
             lambda o: print(o.x, file=o.sink)),
    HostRead("f'{loss:.3f}', format(loss)", "__format__", "always", True, "raises",
             "Tensor.__format__ (torch/_tensor.py): item() for 0-dim, else str(self)",
             lambda o: f"{o.loss:.3f}"),
    HostRead("f'{x}' (a vector)", "__format__", "always", True, "raises",
             "Tensor.__format__ -> str(self) -> torch/_tensor_str.py",
             lambda o: f"{o.x}"),
    # ---- copies to the host
    HostRead("loss.cpu()", "cpu", "always", True, "raises",
             "Tensor.cpu: a blocking copy ([copy])", lambda o: o.loss.cpu()),
    HostRead("loss.to('cpu')", "to", "blocking to host", True, "raises",
             "Tensor.to: a blocking copy ([copy])", lambda o: o.loss.to("cpu")),
    HostRead("loss.to(torch.device('cpu'))", "to", "blocking to host", True, "raises",
             "Tensor.to ([copy])", lambda o: o.loss.to(torch_module(o).device("cpu"))),
    HostRead("loss.to(device='cpu', dtype=...)", "to", "blocking to host", True, "raises",
             "Tensor.to ([copy])",
             lambda o: o.loss.to(device="cpu", dtype=torch_module(o).float64)),
    HostRead("x.to(host_tensor)", "to", "blocking to host", True, "raises",
             "Tensor.to(other): other's device and dtype ([copy])", lambda o: o.x.to(o.host)),
    HostRead("host.copy_(x)", "copy_", "into host", True, "raises",
             "Tensor.copy_ docs; a blocking copy ([copy])", lambda o: o.host.copy_(o.x)),
    HostRead("host.copy_(x, non_blocking=True) (host memory not pinned)", "copy_",
             "into host", True, "silent", "[copy]; [api]",
             lambda o: o.host.copy_(o.x, non_blocking=True),
             note="torch calls only cudaMemcpyAsync, which the mode does not see, but into "
                  "pageable memory it 'will return only once the copy has completed' ([api])"),
    HostRead("loss.numpy(), numpy.asarray(loss)", "numpy", "always", True, "refuses",
             "Tensor.numpy docs: only for CPU tensors", lambda o: o.loss.numpy(),
             note="a device tensor is refused (TypeError: use Tensor.cpu()); counted, because "
                  "on a GPU this line needs a copy to the host first, or fails"),
    HostRead("numpy.asarray(x)", "__array__", "always", True, "refuses",
             "Tensor.__array__ (torch/_tensor.py) -> self.numpy()", lambda o: o.x.__array__(),
             note="as .numpy(): refused for a device tensor, counted as the read it asks for"),
    HostRead("torch.tensor([loss_a, loss_b]) (a tensor built from device tensors)", "tensor",
             "device data", True, "raises",
             "torch/csrc/utils/tensor_new.cpp, internal_new_from_data -> recursive_store -> "
             "store_scalar: each element's value, read with the Python dispatch key excluded "
             "(why a TorchDispatchMode never saw it) ([scalar])",
             lambda o: torch_module(o).tensor([o.loss, o.loss])),
    HostRead("torch.as_tensor([loss_a, loss_b])", "as_tensor", "device data", True, "raises",
             "as torch.tensor (internal_new_from_data)",
             lambda o: torch_module(o).as_tensor([o.loss, o.loss])),
    # ---- a result's shape depends on device values: the host must read them to allocate it
    HostRead("x[mask] (boolean-mask indexing)", "__getitem__", "bool index", True, "raises",
             "Tensor indexing docs; a bool index is turned into nonzero(mask) ([c10])",
             lambda o: o.x[o.mask]),
    HostRead("torch.nonzero(x), x.nonzero()", "nonzero", "always", True, "raises",
             "torch.nonzero docs; aten/src/ATen/native/cuda/Nonzero.cu: memcpy_and_sync of "
             "the count ([c10])", lambda o: o.x.nonzero()),
    HostRead("torch.argwhere(x)", "argwhere", "always", True, "raises",
             "torch.argwhere: nonzero()", lambda o: torch_module(o).argwhere(o.x)),
    HostRead("torch.where(condition) (one argument)", "where", "condition only", True,
             "raises", "torch.where docs: where(condition) is nonzero(condition, as_tuple=True)",
             lambda o: torch_module(o).where(o.mask)),
    HostRead("torch.masked_select(x, mask)", "masked_select", "always", True, "raises",
             "torch.masked_select docs: a 1-D tensor of the selected values ([c10])",
             lambda o: torch_module(o).masked_select(o.x, o.mask)),
    HostRead("torch.unique(x), x.unique()", "unique", "always", True, "raises",
             "aten/src/ATen/native/cuda/UniqueCub.cu: length.item() sizes the result",
             lambda o: o.x.unique()),
    HostRead("torch.unique_consecutive(x)", "unique_consecutive", "always", True, "raises",
             "as torch.unique ([scalar])", lambda o: o.x.unique_consecutive()),
    HostRead("x.repeat_interleave(counts) (without output_size)", "repeat_interleave",
             "tensor repeats", True, "raises",
             "torch.repeat_interleave docs: output_size avoids 'stream synchronization' "
             "(aten Repeat.h: cumsum[-1].item())", lambda o: o.x.repeat_interleave(o.counts)),
    # ---- the host waits, but no device value reaches it: not a read
    HostRead("host.to(device) (a blocking upload)", "to", "-", False, "raises",
             "[copy]: memcpy_and_sync also for host-to-device copies",
             lambda o: o.host.to(o.device),
             note="the host waits for the stream (cudaStreamSynchronize), but reads no device "
                  "value; moving data to the device is what training does, so not counted"),
    # ---- neither waits nor reads: the controls
    HostRead("loss.to('cpu', non_blocking=True)", "to", "-", False, "silent",
             "Tensor.to docs; [copy] (pinned result, cudaMemcpyAsync)",
             lambda o: o.loss.to("cpu", non_blocking=True)),
    HostRead("x.repeat_interleave(counts, output_size=n)", "repeat_interleave", "-", False,
             "silent", "torch.repeat_interleave docs (output_size)",
             lambda o: o.x.repeat_interleave(o.counts, output_size=6)),
    HostRead("x.nonzero_static(size=n)", "nonzero_static", "-", False, "silent",
             "torch.nonzero_static docs: a fixed size, so no count is read (Nonzero.cu)",
             lambda o: o.x.nonzero_static(size=4)),
    HostRead("torch.where(mask, x, 0.0)", "where", "-", False, "silent", "torch.where docs",
             lambda o: torch_module(o).where(o.mask, o.x, 0.0)),
    HostRead("x.masked_fill(mask, 0.0)", "masked_fill", "-", False, "silent",
             "Tensor.masked_fill: same shape", lambda o: o.x.masked_fill(o.mask, 0.0)),
    HostRead("x[index] (an integer tensor index)", "__getitem__", "-", False, "silent",
             "advanced indexing with integers: the shape is the index's",
             lambda o: o.x[o.index]),
    HostRead("total + loss.detach(), x.sum(), loss > 0", "add", "-", False, "silent",
             "[sem]: device operations are queued", lambda o: (o.loss.detach() + o.x.sum(),
                                                                o.loss > 0)),
    HostRead("torch.stack([loss_a, loss_b])", "stack", "-", False, "silent",
             "[sem]", lambda o: torch_module(o).stack([o.loss, o.loss])),
    HostRead("x.shape, len(x), x.numel(), x.device, list(x)", "size", "-", False, "silent",
             "sizes and the device are host metadata", lambda o: (
                 o.x.shape, len(o.x), o.x.numel(), o.x.device, list(o.x))),
    HostRead("torch.zeros((), device=x.device)", "zeros", "-", False, "silent",
             "[sem]", lambda o: torch_module(o).zeros((), device=o.x.device)),
    HostRead("torch.isfinite(x).all() (kept as a tensor)", "all", "-", False, "silent",
             "[sem]", lambda o: torch_module(o).isfinite(o.x).all()),
)


def torch_module(operands):
    """torch, for the table's examples (the probe kit imports torch inside functions)."""
    import torch

    return torch


# ------------------------------------------------------------------ deciding one call

def _tensors_in(value):
    import torch

    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for item in value for t in _tensors_in(item)]
    return []


def _target(args, kwargs):
    """Where a Tensor.to call sends its result: a device, a tensor, or None (same device)."""
    import torch

    if "device" in kwargs:
        return kwargs["device"]
    if "other" in kwargs:
        return kwargs["other"]
    for arg in args[1:]:
        if isinstance(arg, (str, torch.device, torch.Tensor)):
            return arg
    return None


def _blocking(args, kwargs):
    return not (kwargs.get("non_blocking") or any(arg is True for arg in args[1:]))


def _pinned(tensor):
    try:
        return tensor.is_pinned()
    except RuntimeError:  # no accelerator to ask
        return False


# Each condition: (args, kwargs, judge) -> whether the call reads a device value.
_CONDITIONS = {
    "always": lambda args, kwargs, j: bool(args) and j.on_device(args[0]),
    "two operands": lambda args, kwargs, j: any(j.on_device(t) for t in _tensors_in(args)),
    "blocking to host": lambda args, kwargs, j: j.on_device(args[0]) and _blocking(
        args, kwargs) and j.is_host(_target(args, kwargs)),
    "into host": lambda args, kwargs, j: (
        len(args) > 1 and not j.on_device(args[0]) and j.on_device(args[1])
        and (_blocking(args[1:], kwargs) or not _pinned(args[0]))),
    "bool index": lambda args, kwargs, j: j.on_device(args[0]) and any(
        str(t.dtype) == "torch.bool" for t in _tensors_in(args[1:])),
    "tensor repeats": lambda args, kwargs, j: kwargs.get("output_size") is None and any(
        j.on_device(t) for t in _tensors_in(
            [*(args[1:2] if len(args) > 1 else args[:1]), kwargs.get("repeats")])),
    "condition only": lambda args, kwargs, j: len(args) == 1 and not kwargs
        and j.on_device(args[0]),
    "device data": lambda args, kwargs, j: bool(args) and isinstance(args[0], (list, tuple))
        and any(j.on_device(t) for t in _tensors_in(args[0])),
}

_READS_BY_OP: dict[str, list] = {}
for _entry in HOST_READS:
    if _entry.reads:
        _READS_BY_OP.setdefault(_entry.op, []).append(_entry)
del _entry


class DeviceJudge:
    """Which tensors stand for device tensors, and which targets are the host.

    ``on_device(t)``: by default every tensor that is not known to be on the host (a CPU
    grader stands in for a GPU); ``meta=True``: meta tensors only. Known host tensors are those
    the counter saw made on the host: copies to it, and tensors built without a device.
    ``device_handles``: torch.device objects that name the learner's device (the counter adds
    each ``tensor.device`` it hands out), so ``x.to(x.device)`` stays a move, not a read.
    """

    def __init__(self, meta=False, device_handles=()):
        self.meta = meta
        self.host = {}  # id -> a weak reference, dropped when the tensor dies (graphs must)
        self.handles = {id(handle): handle for handle in device_handles}

    def on_device(self, value):
        import torch

        if not isinstance(value, torch.Tensor):
            return False
        if self.meta:
            return value.device.type == "meta"
        return id(value) not in self.host

    def is_host(self, target):
        import torch

        if target is None:
            return False
        if isinstance(target, torch.Tensor):
            return not self.on_device(target)
        if id(target) in self.handles:
            return False
        try:
            return torch.device(target).type == "cpu"
        except (RuntimeError, TypeError):
            return False

    def mark_host(self, value):
        import weakref

        for tensor in _tensors_in(value):
            key = id(tensor)  # the callback runs as the tensor dies, before its id is reused
            self.host[key] = weakref.ref(tensor, lambda _, key=key, host=self.host:
                                         host.pop(key, None))


def read_by(func, args, kwargs, judge):
    """The :class:`HostRead` entry by which this torch call reads a device value, or None."""
    for entry in _READS_BY_OP.get(getattr(func, "__name__", ""), ()):
        if _CONDITIONS[entry.when](args, kwargs or {}, judge):
            return entry
    return None


# Functions that make a tensor on the device they are told (on the host when told none).
_FACTORIES = {"tensor", "as_tensor", "zeros", "ones", "empty", "full", "arange", "linspace",
              "logspace", "eye", "rand", "randn", "randint", "randperm", "from_numpy",
              "scalar_tensor", "empty_strided"}


def _made_on_host(name, args, kwargs, judge):
    """Whether a call's tensor results live on the host (on the GPU the learner meant)."""
    import torch

    if name in _FACTORIES:
        device = kwargs.get("device")
        if name in ("tensor", "as_tensor") and device is None:
            inputs = _tensors_in(args[:1])
            return not inputs or not any(judge.on_device(t) for t in inputs)
        return device is None or judge.is_host(device)
    if name == "cpu":
        return True
    if name == "to" and _target(args, kwargs) is not None:
        return judge.is_host(_target(args, kwargs))  # a move: where it goes
    inputs = [t for t in _tensors_in([*args, *kwargs.values()])
              if isinstance(t, torch.Tensor)]
    return bool(inputs) and not any(judge.on_device(t) for t in inputs)


def _stores_device_values(name, args, kwargs, judge):
    """Whether an in-place call writes device values into a host tensor (``total += loss``
    with ``total = torch.zeros(())``): on a GPU that raises, so the tensor is taken to be where
    the learner meant it to be, on the device. ``copy_`` is the one in-place copy to the host."""
    in_place = (name.endswith("_") and not name.startswith("_")) or (
        name.startswith("__i") and name != "__index__" and name != "__int__")
    return (in_place and name != "copy_" and bool(args) and not judge.on_device(args[0])
            and any(judge.on_device(t) for t in _tensors_in([*args[1:], *kwargs.values()])))


def host_read_counter(log=None, label="read", meta=False, device_handles=()):
    """A torch function mode that appends to ``reads`` the :class:`HostRead` entry of each read
    of a device value made while it is active, and to ``log`` ``label`` (None: the entry's op).

    ``with host_read_counter(log, "read") as counter: ...``; ``counter.judge.mark_host(t)``
    declares tensors that live on the host on the GPU too.
    """
    import torch
    from torch.overrides import TorchFunctionMode

    class Counter(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.reads, self.judge = [], DeviceJudge(meta, device_handles)

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            entry = read_by(func, args, kwargs, self.judge)
            moved = bool(args) and self.judge.on_device(args[0])
            if entry is not None:
                self.reads.append(entry)
                if log is not None:
                    log.append(entry.op if label is None else label)
            out = func(*args, **kwargs)
            if func == torch.Tensor.device.__get__ and moved:
                self.judge.handles[id(out)] = out
                return out
            name = getattr(func, "__name__", "")
            if not meta and _stores_device_values(name, args, kwargs, self.judge):
                self.judge.host.pop(id(args[0]), None)
            elif not meta:
                host = _made_on_host(name, args, kwargs, self.judge)
                if name in ("cpu", "to") and out is args[0] and host == moved:
                    out = out.clone()  # a CPU grader's move between host and device is none
                if host:
                    self.judge.mark_host(out)
            return out

    return Counter()

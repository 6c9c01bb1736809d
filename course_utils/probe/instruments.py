"""Instruments a probe attaches to the learner's code, and removes afterwards.

* :class:`patched` -- set attributes for the duration of a probe, then restore them;
* :class:`Spy` -- record the calls of a function (and keep calling it);
* :class:`ForwardRecorder` -- record each forward pass of a module: mode, grad, where the
  inputs arrived;
* :class:`StopAfter` -- a loader that ends the learner's loop after N batches;
* :func:`track_moves`, :class:`TrackedBatches` -- tensors that record where ``.to()`` sent them;
* :func:`meta_recorder` -- on meta tensors, reads of device values (probe/syncs.py's table),
  one-example indexing, and calls mixing meta and host operands;
* :func:`meta_stand_in` -- runs the learner's code on meta tensors (a GPU's stand-in) until it
  mixes devices or reads a device value, and says which operation on which line did;
* :func:`loss_watch` -- a loss function that keeps each loss, and a mode that logs each
  operation building a graph on one of them (a running total kept without ``detach()``);
* :func:`meta_generators` -- ``torch.Generator(device="meta")`` works (a CPU one stands in),
  and ``torch.randperm`` refuses a generator of another device, as a GPU's does.
"""
from .facts import StopProbe, learner_line, type_name
from .syncs import DeviceJudge, read_by


class patched:
    """Context manager: set attributes for the duration of a probe, then restore them.

    ``with patched([(torch.cuda, "is_available", lambda: False)]):``
    """

    def __init__(self, replacements):
        self.replacements = list(replacements)
        self.saved = []

    def __enter__(self):
        for owner, name, replacement in self.replacements:
            self.saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, replacement)
        return self

    def __exit__(self, *exc_info):
        for owner, name, original in reversed(self.saved):
            setattr(owner, name, original)
        self.saved.clear()
        return False


class Spy:
    """Record every call of ``owner.name`` while active, then call the original.

    ``calls`` holds, per call, what ``record(*args, **kwargs)`` returns (default: the
    number of positional arguments). With ``log`` (a list shared by several spies and
    hooks) each call appends ``label``, so a probe sees the order of events.
    ``replacement(original, *args, **kwargs)`` runs instead of the original when given.
    """

    def __init__(self, owner, name, label=None, log=None, record=None, replacement=None):
        self.owner, self.name = owner, name
        self.label = label or name
        self.log = log
        self.record = record or (lambda *args, **kwargs: {"args": len(args)})
        self.replacement = replacement
        self.calls = []
        self._patch = None

    def __enter__(self):
        original = getattr(self.owner, self.name)

        def spy(*args, **kwargs):
            self.calls.append(self.record(*args, **kwargs))
            if self.log is not None:
                self.log.append(self.label)
            if self.replacement is not None:
                return self.replacement(original, *args, **kwargs)
            return original(*args, **kwargs)

        self._patch = patched([(self.owner, self.name, spy)]).__enter__()
        return self

    def __exit__(self, *exc_info):
        return self._patch.__exit__(*exc_info)


class ForwardRecorder:
    """Record each forward pass of ``module``: mode, autograd, autocast and the first input.

    ``stop_if(record)`` returning True raises :class:`StopProbe` before the forward pass runs
    (e.g. inputs on the wrong device, which on a real GPU would raise a mismatch error).
    """

    def __init__(self, module, log=None, stop_if=None):
        import torch

        self.records = []

        def hook(mod, args):
            first = args[0] if args else None
            record = {
                "training": bool(mod.training),
                "grad_enabled": torch.is_grad_enabled(),
                "inference_mode": torch.is_inference_mode_enabled(),
                "input_type": type_name(first),
                "input_device": str(first.device) if isinstance(first, torch.Tensor) else None,
                "input_dtype": (str(first.dtype).replace("torch.", "")
                                if isinstance(first, torch.Tensor) else None),
                "autocast": {kind: torch.is_autocast_enabled(kind) for kind in ("cpu", "cuda")},
            }
            self.records.append(record)
            if log is not None:
                log.append("forward")
            if stop_if is not None and stop_if(record):
                raise StopProbe()

        self._handle = module.register_forward_pre_hook(hook)

    def remove(self):
        self._handle.remove()


class StopAfter:
    """An iterable over ``loader`` that stops the learner's loop after ``batches`` batches.

    ``len()`` is the loader's, as the learner expects; the loop is ended with
    :class:`StopProbe` when it asks for one batch more than allowed.
    """

    def __init__(self, loader, batches):
        self.loader, self.batches, self.served = loader, batches, 0
        self.dataset = getattr(loader, "dataset", None)

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        for batch in self.loader:
            if self.served >= self.batches:
                raise StopProbe()
            self.served += 1
            yield batch


def track_moves(tensor, moves):
    """``tensor`` as a subclass whose ``.to()``, ``.cuda()`` and ``.cpu()`` record in ``moves``
    the device they return, so a probe can tell "moved, but the copy was thrown away"
    (``x.to(device)`` without assignment) from "never moved"."""
    import torch

    class Tracked(torch.Tensor):  # each call makes its own class: moved copies are plain
        def to(self, *args, **kwargs):  # tensors, or two batches' classes could not meet
            moved = super().to(*args, **kwargs).as_subclass(torch.Tensor)
            moves.append(str(moved.device))
            return moved

        def cuda(self, *args, **kwargs):
            moves.append("cuda")
            return super().cuda(*args, **kwargs).as_subclass(torch.Tensor)

        def cpu(self, *args, **kwargs):
            moves.append("cpu")
            return super().cpu(*args, **kwargs).as_subclass(torch.Tensor)

    return tensor.as_subclass(Tracked)


class TrackedBatches:
    """A loader whose batches are :func:`track_moves` tensors; ``len()`` and ``dataset`` as
    the wrapped loader's."""

    def __init__(self, loader, moves):
        self.loader, self.moves = loader, moves
        self.dataset = getattr(loader, "dataset", None)

    def __len__(self):
        return len(self.loader)

    def __iter__(self):
        for batch in self.loader:
            yield tuple(track_moves(item, self.moves) for item in batch)


def meta_recorder():
    """A torch function mode that records, for calls on meta tensors (a GPU's stand-in),
    ``host``: the reads of device values asked for ('.cpu()', '.item()', ..., as the table of
    probe/syncs.py judges them), ``single``: how many results have fewer dimensions than
    their input (``data[i]``, one example at a time), and ``mixed``: calls that combine meta
    tensors with host ones (:func:`meta_and_host`; ``data[index]`` with a host ``index``
    works on a GPU too, but copies the index to the device first)."""
    from torch.overrides import TorchFunctionMode

    class Recorder(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.host, self.single, self.judge = [], 0, DeviceJudge(meta=True)
            self.mixed = []  # {"operation", "line"} of calls mixing meta and host operands

        def __torch_function__(self, func, types, args=(), kwargs=None):
            import torch

            kwargs = kwargs or {}
            meta = bool(args) and isinstance(args[0], torch.Tensor) \
                and args[0].device.type == "meta"
            if meta and read_by(func, args, kwargs, self.judge) is not None:
                self.host.append(f".{getattr(func, '__name__', '')}()")
            if len(meta_and_host(args, kwargs)) > 1:
                self.mixed.append({"operation": getattr(func, "__name__", str(func)),
                                   "line": learner_line()})
            out = func(*args, **kwargs)
            if meta and isinstance(out, torch.Tensor) and out.ndim < args[0].ndim:
                self.single += 1
            return out

    return Recorder()


def meta_generators():
    """:class:`patched` entries for meta data standing in for a GPU's. ``torch.Generator(
    device=x.device)`` on meta gives a CPU generator, with which ``torch.randperm(...,
    device="meta")`` draws: right on a GPU (the generator lives where the data are), so the
    stand-in must accept it. ``torch.randperm`` then refuses a generator of another device, as
    a GPU's does (``randperm(n, generator=cpu_generator, device="cuda")`` raises).
    ``isinstance(g, torch.Generator)`` stays true for every generator.
    """
    import torch

    real, real_randperm, on_device = torch.Generator, torch.randperm, set()

    class KeepsType(type(real)):
        def __instancecheck__(cls, obj):
            return isinstance(obj, real)

    class Generator(real, metaclass=KeepsType):
        def __new__(cls, device="cpu"):
            if torch.device(device).type != "meta":
                return real(device)
            generator = real("cpu")
            on_device.add(id(generator))
            return generator

    def randperm(*args, **kwargs):
        generator, device = kwargs.get("generator"), kwargs.get("device")
        wanted = "meta" if device is not None and torch.device(device).type == "meta" else "cpu"
        if generator is not None and (id(generator) in on_device) != (wanted == "meta"):
            found = "cpu" if wanted == "meta" else "cuda"
            raise RuntimeError(f"Expected a '{'cuda' if wanted == 'meta' else 'cpu'}' device "
                               f"type for generator but found '{found}' (on a GPU; the check "
                               "stands in for one with the meta device)")
        return real_randperm(*args, **kwargs)

    return [(torch, "Generator", Generator), (torch, "randperm", randperm)]


def meta_and_host(args, kwargs):
    """The device types of a call's operands that a GPU would have to hold together: meta
    tensors, and host tensors of one or more dimensions (a 0-dim host tensor may join a device
    operation, as a Python number does). Two types in it: the call mixes devices."""
    import torch

    operands = [*args, *kwargs.values()]
    operands += [item for group in operands if isinstance(group, (list, tuple)) for item in group]
    tensors = [t for t in operands if isinstance(t, torch.Tensor)]
    return {t.device.type for t in tensors if t.device.type == "meta" or t.ndim}


def meta_stand_in(stop_at_read=True):
    """A torch function mode for a run on meta tensors standing in for a GPU's. It ends the
    learner's code (:class:`StopProbe`) where a GPU would fail or the stand-in cannot go on,
    and records what it saw in ``stopped`` (None while the run goes on):

    ``{"why": "mixed", "operation": ..., "devices": [...], "line": LineFacts | None}`` -- an
    operation combined a meta tensor with a host tensor of one or more dimensions (a GPU
    raises "Expected all tensors to be on the same device"; a 0-dim host tensor is allowed);
    ``{"why": "read", ...}`` -- a device value read on the host (probe/syncs.py's table):
    a meta tensor has no values, so the run stops there, after everything before it ran.
    """
    from torch.overrides import TorchFunctionMode

    class StandIn(TorchFunctionMode):
        def __init__(self):
            super().__init__()
            self.stopped, self.judge = None, DeviceJudge(meta=True)

        def _stop(self, why, func, devices):
            self.stopped = {"why": why, "operation": getattr(func, "__name__", str(func)),
                            "devices": sorted(devices), "line": learner_line()}
            raise StopProbe()

        def __torch_function__(self, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            devices = meta_and_host(args, kwargs)
            if len(devices) > 1:
                self._stop("mixed", func, devices)
            if stop_at_read and "meta" in devices \
                    and read_by(func, args, kwargs, self.judge) is not None:
                self._stop("read", func, devices)
            return func(*args, **kwargs)

    return StandIn()


def loss_watch(log):
    """(loss_fn, mode, losses) for a training loop under probe: ``loss_fn`` is cross-entropy
    that keeps each loss in ``losses``; inside ``with mode:``, each operation that builds a
    graph on one of those losses (it was not detached) logs "graph kept"."""
    import torch
    from torch.overrides import TorchFunctionMode

    losses = []

    class Kept(TorchFunctionMode):
        def __torch_function__(self, func, types, args=(), kwargs=None):
            out = func(*args, **(kwargs or {}))
            used = [t for a in args for t in (a if isinstance(a, (list, tuple)) else [a])]
            if getattr(out, "grad_fn", None) is not None and any(
                    t is loss for t in used for loss in losses):
                log.append("graph kept")
            return out

    def loss_fn(logits, labels):
        losses.append(loss := torch.nn.functional.cross_entropy(logits, labels))
        return loss

    return loss_fn, Kept(), losses

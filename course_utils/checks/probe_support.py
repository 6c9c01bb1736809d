"""The pieces every probe is built from; sent to the student's kernel ahead of each probe.

A probe runs in the student's kernel, calls the learner's answer on the checker's inputs and
reports plain, JSON-able facts. The grader sends this module's source, then the probe's, so
everything here is self-contained: plain Python and torch, imports inside functions, no
module-level state. The pieces:

* :func:`describe`, :func:`describe_error` -- facts about a value, an exception;
* :func:`run_learner` -- call the learner's code; its return value or its error, never a crash;
* :class:`StopProbe` -- ends the learner's code once the probe has seen enough;
* :class:`Spy` -- record the calls of a function (and keep calling it);
* :class:`ForwardRecorder` -- record each forward pass of a module: mode, grad, where the
  inputs arrived;
* :class:`StopAfter` -- a loader that ends the learner's loop after N batches;
* :class:`SimulatedMachine` -- make torch's device queries answer as another machine would
  (and record which ones were asked, in order);
* :func:`build_mlp`, :func:`parameter_values`, :func:`optimizer_state_values` -- a model from
  plain numbers, and its parameters and optimizer state back as numbers;
* :func:`track_moves`, :class:`TrackedBatches` -- tensors that record where ``.to()`` sent them.
"""


class StopProbe(BaseException):
    """Raised by a probe's hooks to end the learner's code early.

    A BaseException, so that a learner's ``except Exception:`` does not swallow it.
    """


class NotSimulated(BaseException):
    """The learner called a device query that a :class:`SimulatedMachine` does not answer."""


def type_name(value):
    """The name of a value's type, e.g. 'Tensor', 'Linear', 'NoneType'."""
    return type(value).__name__


def _is_library_file(filename):
    """True for Python's, installed packages' and this course's own files and for the probe."""
    import os
    import sys

    if filename == "<string>" or filename.startswith("<frozen"):
        return True  # the grader's probe program (exec'd from a string), the interpreter
    if filename.startswith("<"):
        return False  # "<stdin>", "<ipython-input-...>": code the learner typed
    try:
        import course_utils
        own = os.path.dirname(os.path.abspath(course_utils.__file__))
    except ImportError:  # pragma: no cover - the kernel always has the course installed
        own = None
    path = os.path.abspath(filename)
    roots = {os.path.abspath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix)}
    return ("site-packages" in path or "dist-packages" in path or any(
        path.startswith(root + os.sep + "lib") for root in roots)
        or (own is not None and path.startswith(own + os.sep)))


def describe_error(error):
    """Facts about an exception the learner's code raised, for verify() to classify.

    ``kinds`` lists the exception's classes (most specific first), so verify() can ask
    "is it a NameError?" without matching message text. ``line`` is the last line of the
    learner's own code in the traceback (None when the error arose elsewhere), and
    ``raised_in`` the library file that raised it, e.g. 'torch/cuda/__init__.py'.
    """
    import linecache
    import traceback

    frames = traceback.extract_tb(error.__traceback__)
    learner = [frame for frame in frames if not _is_library_file(frame.filename)]
    line = None
    if learner:
        frame = learner[-1]
        text = (frame.line or linecache.getline(frame.filename, frame.lineno)).strip()
        line = {"lineno": frame.lineno, "text": text[:200], "function": frame.name}
    raised_in = None
    if frames and _is_library_file(frames[-1].filename):
        parts = frames[-1].filename.replace("\\", "/").split("/")
        anchor = max((i for i, part in enumerate(parts)
                      if part in ("site-packages", "dist-packages")), default=len(parts) - 3)
        raised_in = "/".join(parts[anchor + 1:])
    message = str(error)[:400]
    if isinstance(error, RecursionError):  # its wording depends on where the limit was hit
        message = "maximum recursion depth exceeded"
    return {
        "type": type(error).__name__,
        "kinds": [cls.__name__ for cls in type(error).__mro__
                  if cls not in (BaseException, object)],
        "message": message,
        "attribute": getattr(error, "name", None) if isinstance(error, AttributeError) else None,
        "line": line,
        "raised_in": raised_in,
    }


class LearnerRun:
    """What one call of the learner's code did: its value, its error, or a stop."""

    def __init__(self, value=None, error=None, stopped=False):
        self.value = value
        self.error = error  # a describe_error() dict, or None
        self.stopped = stopped  # a StopProbe ended it (the probe had seen enough)


def run_learner(function, *args, **kwargs):
    """Call the learner's ``function``; an exception becomes ``run.error``, never a crash."""
    try:
        return LearnerRun(value=function(*args, **kwargs))
    except StopProbe:
        return LearnerRun(stopped=True)
    except NotSimulated as gap:
        return LearnerRun(error={"type": "NotSimulated", "kinds": ["NotSimulated"],
                                 "message": str(gap), "attribute": None, "line": None,
                                 "raised_in": None})
    except Exception as error:  # noqa: BLE001 - the learner's code raised: report it as data
        return LearnerRun(error=describe_error(error))


def describe(value, max_values=64):
    """Plain, JSON-able facts about a value: type, then shape/dtype/device, then values."""
    import torch

    facts = {"type": type_name(value)}
    if isinstance(value, torch.Tensor):
        facts.update(
            shape=list(value.shape),
            dtype=str(value.dtype).replace("torch.", ""),
            device=str(value.device),
            requires_grad=bool(value.requires_grad),
            has_grad_fn=value.grad_fn is not None,
        )
        if value.device.type != "meta" and value.numel() <= max_values:
            facts["values"] = value.detach().to("cpu", torch.float64).flatten().tolist()
    elif isinstance(value, torch.nn.Module):
        params = list(value.parameters())
        facts.update(
            device=str(params[0].device) if params else None,
            devices=sorted({str(p.device) for p in params}),
            training=bool(value.training),
        )
    elif isinstance(value, torch.device):
        facts.update(device_type=value.type, index=value.index, text=str(value))
    elif isinstance(value, (bool, int, float, str)) or value is None:
        facts["value"] = value
    elif isinstance(value, (list, tuple)):
        facts["items"] = [describe(item, max_values) for item in value[:max_values]]
    elif isinstance(value, dict):
        facts["items"] = {str(key): describe(item, max_values)
                          for key, item in list(value.items())[:max_values]}
    return facts


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


def build_mlp(spec, device="cpu", dropout=None):
    """Linear-ReLU-[Dropout]-Linear with the weights given as plain lists in ``spec``.

    ``spec`` holds ``w1`` (hidden x in), ``b1``, ``w2`` (out x hidden), ``b2``. On the
    'meta' device the model has the shapes and no values (a stand-in for a GPU).
    """
    import torch

    hidden, n_in = len(spec["w1"]), len(spec["w1"][0])
    n_out = len(spec["w2"])
    layers = [torch.nn.Linear(n_in, hidden, device="meta"), torch.nn.ReLU()]
    if dropout is not None:
        layers.append(torch.nn.Dropout(dropout))
    layers.append(torch.nn.Linear(hidden, n_out, device="meta"))
    model = torch.nn.Sequential(*layers)
    if str(device) != "meta":
        model.to_empty(device=device)
        linears = [layer for layer in model if isinstance(layer, torch.nn.Linear)]
        with torch.no_grad():
            for layer, weight, bias in zip(linears, ("w1", "w2"), ("b1", "b2"), strict=True):
                layer.weight.copy_(torch.tensor(spec[weight]))
                layer.bias.copy_(torch.tensor(spec[bias]))
    return model


def parameter_values(module):
    """Every parameter's values as nested lists (float64), in ``parameters()`` order."""
    import torch

    return [p.detach().to("cpu", torch.float64).tolist() for p in module.parameters()]


def optimizer_state_values(optimizer):
    """Each parameter's optimizer state (e.g. Adam's step, exp_avg) as plain numbers, in order."""
    import torch

    return [{key: value.detach().to("cpu", torch.float64).tolist()
             for key, value in optimizer.state.get(param, {}).items()}
            for group in optimizer.param_groups for param in group["params"]]


class SimulatedMachine:
    """Make torch's device queries answer as the machine ``spec`` would, while active.

    ``spec``: ``{"name": ..., "gpus": [{"name", "total_memory", "major", "minor",
    "multi_processor_count"}, ...], "mps": bool, "cuda_version": "12.8" or None}``.
    Every public query of ``torch.cuda``, ``torch.backends.mps``, ``torch.mps`` and
    ``torch.accelerator`` answers consistently with it. Any other public function of those
    modules raises :class:`NotSimulated` naming it, so verify() can say which call the
    check does not simulate instead of a confusing error from the real machine.
    """

    MODULES = ("torch.cuda", "torch.backends.mps", "torch.mps", "torch.accelerator")

    def __init__(self, spec, log=None):
        self.spec = spec
        # The simulated functions called, in order ('torch.cuda.is_available'); pass a list
        # shared with Spy objects to see them interleaved with other events.
        self.queries = [] if log is None else log
        self._patch = None

    def _answers(self):
        import types

        import torch

        gpus, mps = self.spec["gpus"], bool(self.spec["mps"])
        state = {"current": 0}
        accelerator = "cuda" if gpus else ("mps" if mps else None)

        def index_of(device=None):
            if device is None:
                return state["current"]
            if isinstance(device, int):
                return device
            return torch.device(device).index or 0

        def gpu(device=None):
            index = index_of(device)
            if not gpus:
                raise RuntimeError("No CUDA GPUs are available")
            if not 0 <= index < len(gpus):
                raise RuntimeError("Invalid device id")  # what CUDA says for cuda:N, N too big
            return gpus[index]

        class Properties(types.SimpleNamespace):
            def __getattr__(self, name):
                raise NotSimulated(f"torch.cuda.get_device_properties(...).{name}")

        def set_device(device):
            state["current"] = index_of(device)
            gpu()

        def current_accelerator(check_available=False):
            return torch.device(accelerator) if accelerator else None

        def memory_info(device=None):
            total = gpu(device)["total_memory"]
            return (int(total * 0.95), total)

        zero = lambda device=None: 0
        nothing = lambda *args, **kwargs: None

        def requires(present, message):
            # Real torch raises RuntimeError when the device is missing (e.g. synchronize()).
            def answer(*args, **kwargs):
                if not present:
                    raise RuntimeError(message)
            return answer

        return {
            "torch.cuda": {
                "is_available": lambda: bool(gpus),
                "device_count": lambda: len(gpus),
                "current_device": lambda: (gpu(), state["current"])[1],
                "set_device": set_device,
                "get_device_name": lambda device=None: gpu(device)["name"],
                "get_device_properties": lambda device=None: Properties(**gpu(device)),
                "get_device_capability": lambda device=None: (gpu(device)["major"],
                                                              gpu(device)["minor"]),
                # Like torch's: native bfloat16 from compute capability 8.0; by default
                # emulated bfloat16 counts too, so a T4 (7.5) answers True.
                "is_bf16_supported": lambda including_emulation=True: (
                    bool(gpus) and (gpu()["major"] >= 8 or bool(including_emulation))),
                "is_initialized": lambda: False,
                "init": nothing,
                "synchronize": lambda device=None: (gpu(device), None)[1],
                "mem_get_info": memory_info,
                "memory_allocated": zero, "memory_reserved": zero,
                "max_memory_allocated": zero, "max_memory_reserved": zero,
                "reset_peak_memory_stats": nothing, "empty_cache": nothing,
                "get_arch_list": lambda: ["sm_80", "sm_90", "sm_100", "sm_120"] if gpus else [],
            },
            "torch.backends.mps": {
                "is_available": lambda: mps,
                "is_built": lambda: mps,
                # A simulated Mac runs a macOS recent enough for PyTorch's MPS (14+).
                "is_macos_or_newer": lambda major, minor=0: mps and (major, minor) <= (14, 0),
                "is_macos13_or_newer": lambda minor=0: mps,
            },
            "torch.mps": {
                "is_available": lambda: mps,
                "device_count": lambda: int(mps),
                "synchronize": requires(mps, "Cannot execute deviceSynchronize() without "
                                        "MPS backend."),
                "empty_cache": nothing,
                "current_allocated_memory": lambda: 0,
            },
            "torch.accelerator": {
                "is_available": lambda: accelerator is not None,
                "current_accelerator": current_accelerator,
                "device_count": lambda: len(gpus) if gpus else int(mps),
                "current_device_index": lambda: state["current"] if accelerator else -1,
                "current_device_idx": lambda: state["current"] if accelerator else -1,
                "set_device_index": set_device, "set_device_idx": set_device,
                "synchronize": requires(accelerator, "Cannot access accelerator device when "
                                        "none is available."),
                "empty_cache": nothing,
            },
        }

    def __enter__(self):
        import importlib
        import inspect

        import torch

        replacements = [(torch.version, "cuda", self.spec.get("cuda_version"))]
        for module_name, answers in self._answers().items():
            module = importlib.import_module(module_name)
            for name in dir(module):
                value = getattr(module, name)
                if name.startswith("_") or not callable(value) or inspect.isclass(value) \
                        or not getattr(value, "__module__", "").startswith("torch"):
                    continue
                if name in answers:
                    replacements.append((module, name, self._answer(f"{module_name}.{name}",
                                                                    answers[name])))
                else:
                    replacements.append((module, name, self._gap(f"{module_name}.{name}")))
        self._patch = patched(replacements).__enter__()
        return self

    def _answer(self, qualified_name, answer):
        def simulated(*args, **kwargs):
            self.queries.append(qualified_name)
            return answer(*args, **kwargs)
        return simulated

    @staticmethod
    def _gap(qualified_name):
        def not_simulated(*args, **kwargs):
            raise NotSimulated(f"{qualified_name}()")
        return not_simulated

    def __exit__(self, *exc_info):
        return self._patch.__exit__(*exc_info)


def track_moves(tensor, moves):
    """``tensor`` as a subclass whose ``.to()``, ``.cuda()`` and ``.cpu()`` record in ``moves``
    the device they return, so a probe can tell "moved, but the copy was thrown away"
    (``x.to(device)`` without assignment) from "never moved"."""
    import torch

    class Tracked(torch.Tensor):
        def to(self, *args, **kwargs):
            moved = super().to(*args, **kwargs)
            moves.append(str(moved.device))
            return moved

        def cuda(self, *args, **kwargs):
            moves.append("cuda")
            return super().cuda(*args, **kwargs)

        def cpu(self, *args, **kwargs):
            moves.append("cpu")
            return super().cpu(*args, **kwargs)

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

class SimulatedClock:
    """A clock that moves only when the probe says so, and devices that run work later.

    While active, ``time.perf_counter``, ``time.time``, ``time.monotonic``, their ``_ns``
    forms and ``timeit.default_timer`` read :attr:`now` in the probe's thread (other threads
    get the real time); ``torch.cuda.synchronize``, ``torch.mps.synchronize`` and
    ``torch.accelerator.synchronize`` first answer as the active :class:`SimulatedMachine`
    would (raising where it raises), then wait for that device's queued work. The probe
    spends time with :meth:`cpu` (the CPU works before returning) and :meth:`launch` (work
    queued on a device, 'cuda:0' or 'mps', that runs after what is queued there already).
    ``log`` (shareable) gets ``{"event": "clock", "pending": [devices still busy]}`` per
    reading and ``{"event": "sync", "api": ..., "device": ...}`` per synchronisation
    (device None when the call raised); past ``limit`` entries a :class:`StopProbe` ends
    the learner's code, so a loop waiting for this clock cannot hang. ``namespaces`` (e.g.
    the learner's function's ``__globals__``) get the simulated clocks too, in place of names
    bound to the real ones (``from time import perf_counter``).
    """

    CLOCKS = ("perf_counter", "time", "monotonic")

    def __init__(self, log=None, start=1000.0, limit=5000, namespaces=()):
        self.now, self.busy_until = float(start), {}
        self.log = [] if log is None else log
        self.limit, self.namespaces = limit, list(namespaces)
        self._patch, self._renamed = None, []

    def cpu(self, seconds):
        self.now += seconds

    def launch(self, device, seconds):
        self.busy_until[device] = max(self.busy_until.get(device, self.now), self.now) + seconds

    def pending(self):
        return sorted(device for device, until in self.busy_until.items() if until > self.now)

    def _note(self, event):
        self.log.append(event)
        if len(self.log) > self.limit:
            raise StopProbe()

    def __enter__(self):
        import threading
        import time
        import timeit

        import torch

        main = threading.get_ident()

        def clock(original, per_second=None):
            def read(*args, **kwargs):
                if threading.get_ident() != main:
                    return original(*args, **kwargs)
                self._note({"event": "clock", "pending": self.pending()})
                return self.now if per_second is None else int(self.now * per_second)
            return read

        def cuda(device=None):
            index = device if isinstance(device, int) else (
                None if device is None else torch.device(device).index)
            return f"cuda:{torch.cuda.current_device() if index is None else index}"

        def accelerator(device=None):
            kind = torch.accelerator.current_accelerator().type
            return cuda(device) if kind == "cuda" else kind

        def sync(owner, api, which):
            original = owner.synchronize

            def synchronize(*args, **kwargs):
                event = {"event": "sync", "api": api, "device": None}
                self._note(event)
                original(*args, **kwargs)
                event["device"] = which(*args, **kwargs)
                self.now = max(self.now, self.busy_until.get(event["device"], self.now))
            return (owner, "synchronize", synchronize)

        clocks = ([(time, name, clock(getattr(time, name))) for name in self.CLOCKS]
                  + [(time, f"{name}_ns", clock(getattr(time, f"{name}_ns"), 10**9))
                     for name in self.CLOCKS]
                  + [(timeit, "default_timer", clock(timeit.default_timer))])
        simulated = {id(getattr(owner, name)): new for owner, name, new in clocks}
        self._patch = patched(clocks + [
            sync(torch.cuda, "torch.cuda.synchronize", cuda),
            sync(torch.mps, "torch.mps.synchronize", lambda: "mps"),
            sync(torch.accelerator, "torch.accelerator.synchronize", accelerator)]).__enter__()
        for namespace in self.namespaces:
            for key, value in list(namespace.items()):
                if id(value) in simulated:
                    self._renamed.append((namespace, key, value))
                    namespace[key] = simulated[id(value)]
        return self

    def __exit__(self, *exc_info):
        for namespace, key, value in reversed(self._renamed):
            namespace[key] = value
        self._renamed.clear()
        return self._patch.__exit__(*exc_info)

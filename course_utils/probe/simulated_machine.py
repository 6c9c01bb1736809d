"""Make torch's device queries answer as another machine would."""
from typing import ClassVar

from .facts import NotSimulated
from .instruments import patched


def _properties(module):
    """What ``<module>.get_device_properties()`` returns: the spec's fields, and NotSimulated
    for any other."""
    import types

    class Properties(types.SimpleNamespace):
        def __getattr__(self, name):
            raise NotSimulated(f"{module}.get_device_properties(...).{name}")
    return Properties


class SimulatedMachine:
    """Make torch's device queries answer as the machine ``spec`` would, while active.

    ``spec``: ``{"name": ..., "accelerators": {"cuda": [{"name", "total_memory", "major",
    "minor", "multi_processor_count"}, ...], "mps": 1, "xpu": [{"name", "total_memory",
    "has_bfloat16_conversions"}, ...]}, "cuda_version": "12.8" or None}``
    (``checks/machines.py`` builds them; a type left out is absent). Every public query of the
    modules in ``MODULES`` and of ``torch.accelerator`` answers consistently with it, on every
    machine: one without an XPU says so through ``torch.xpu``. Any other public function of
    those modules raises :class:`NotSimulated` naming it, so verify() can say which call the
    check does not simulate instead of a confusing error from the real machine.
    """

    # Device type -> the torch modules that answer for it. The first type present, in this
    # order, is the machine's accelerator (torch.accelerator's one current accelerator).
    MODULES: ClassVar[dict[str, tuple[str, ...]]] = {
        "cuda": ("torch.cuda",), "mps": ("torch.backends.mps", "torch.mps"), "xpu": ("torch.xpu",)}
    # What torch raises when a device of the type is asked for on a machine without one.
    MISSING: ClassVar[dict[str, str]] = {"cuda": "No CUDA GPUs are available",
                                         "xpu": "No XPU devices are available"}

    def __init__(self, spec, log=None):
        self.spec = spec
        # The simulated functions called, in order ('torch.cuda.is_available'); pass a list
        # shared with Spy objects to see them interleaved with other events.
        self.queries = [] if log is None else log
        self._patch = None
        self._current = 0  # the current device's index (torch.cuda.current_device())
        present = spec["accelerators"]
        self.units = {kind: ([{"name": "Apple GPU"}] * int(present.get(kind, 0)) if kind == "mps"
                             else list(present.get(kind, []))) for kind in self.MODULES}
        self.accelerator = next((kind for kind in self.MODULES if self.units[kind]), None)

    def _index_of(self, device=None) -> int:
        import torch

        if device is None:
            return self._current
        if isinstance(device, int):
            return device
        index = torch.device(device).index  # torch.device("cuda"): the current device
        return self._current if index is None else index

    def _unit(self, kind, device=None) -> dict:
        """The spec of the ``kind`` device ``device`` names (the current one by default)."""
        index, units = self._index_of(device), self.units[kind]
        if not units:
            raise RuntimeError(self.MISSING[kind])
        if not 0 <= index < len(units):
            raise RuntimeError("Invalid device id")  # what CUDA says for cuda:N, N too big
        return units[index]

    def _synchronize(self, kind):
        """``torch.<kind>.synchronize``: refuses as torch does, a device of another type too."""
        def synchronize(device=None):
            import torch

            if not self.units[kind]:
                self._unit(kind)  # raises first, as torch's lazy initialisation does
            if isinstance(device, (str, torch.device)) and torch.device(device).type != kind:
                raise ValueError(f"Expected a {kind} device, but got: {device}")  # torch's words
            self._unit(kind, device)
        return synchronize

    def _accelerator_synchronize(self, device=None):
        import torch

        accelerator = self.accelerator
        if accelerator is None:
            raise RuntimeError("Cannot access accelerator device when none is available.")
        kind = torch.device(device).type if isinstance(device, (str, torch.device)) \
            else accelerator
        if kind != accelerator:  # torch's words for a device of another type
            raise ValueError(f"{kind} doesn't match the current accelerator "
                             f"{torch.device(accelerator)}.")
        if accelerator in self.MISSING:  # an indexed type: the index must exist
            self._unit(accelerator, device)

    def _indexed(self, kind, properties):
        """The queries every indexed device type answers alike (CUDA, XPU)."""
        units, unit = self.units[kind], (lambda device=None: self._unit(kind, device))

        def set_device(device):
            self._current = self._index_of(device)
            unit()

        def memory_info(device=None):
            total = unit(device)["total_memory"]
            return (int(total * 0.95), total)

        zero, nothing = (lambda device=None: 0), (lambda *args, **kwargs: None)
        return {
            "is_available": lambda: bool(units), "device_count": lambda: len(units),
            "current_device": lambda: (unit(), self._current)[1], "set_device": set_device,
            "get_device_name": lambda device=None: unit(device)["name"],
            "get_device_properties": lambda device=None: properties(**unit(device)),
            "is_initialized": lambda: False, "init": nothing,
            "synchronize": self._synchronize(kind), "mem_get_info": memory_info,
            "memory_allocated": zero, "memory_reserved": zero,
            "max_memory_allocated": zero, "max_memory_reserved": zero,
            "reset_peak_memory_stats": nothing, "empty_cache": nothing,
        }

    def _answers(self):
        """Module name -> {function name: answer}: each device type's modules, derived from
        the spec's ``accelerators``, and ``torch.accelerator``."""
        self._current = 0  # each simulation starts on device 0
        answers = {"torch.accelerator": self._accelerator_answers(self.accelerator)}
        for kind in self.MODULES:
            answers.update(getattr(self, f"_{kind}_answers")())
        return answers

    def _cuda_answers(self):
        gpus, cuda = self.units["cuda"], self._indexed("cuda", _properties("torch.cuda"))
        gpu = lambda device=None: self._unit("cuda", device)
        cuda.update({
            "get_device_capability": lambda device=None: (gpu(device)["major"],
                                                          gpu(device)["minor"]),
            # Like torch's: native bfloat16 from compute capability 8.0; by default emulated
            # bfloat16 counts too, so a T4 (7.5) answers True.
            "is_bf16_supported": lambda including_emulation=True: (
                bool(gpus) and (gpu()["major"] >= 8 or bool(including_emulation))),
            "get_arch_list": lambda: ["sm_80", "sm_90", "sm_100", "sm_120"] if gpus else [],
        })
        return {"torch.cuda": cuda}

    def _xpu_answers(self):
        xpus, xpu = self.units["xpu"], self._indexed("xpu", _properties("torch.xpu"))
        # Like torch's: emulated bfloat16 counts unless including_emulation=False.
        xpu["is_bf16_supported"] = lambda including_emulation=True: bool(xpus) and (
            bool(including_emulation) or self._unit("xpu")["has_bfloat16_conversions"])
        return {"torch.xpu": xpu}

    def _mps_answers(self):
        mps = bool(self.units["mps"])

        def synchronize(*args, **kwargs):
            if not mps:  # torch's words
                raise RuntimeError("Cannot execute deviceSynchronize() without MPS backend.")

        return {
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
                "synchronize": synchronize,
                "empty_cache": lambda: None,
                "current_allocated_memory": lambda: 0,
            },
        }

    def _accelerator_answers(self, accelerator):
        import torch

        units = self.units[accelerator] if accelerator else []
        present = accelerator is not None
        zero, nothing = (lambda device=None: 0), (lambda *args, **kwargs: None)

        def set_device(device):
            self._current = self._index_of(device)
            if accelerator in self.MISSING:
                self._unit(accelerator)

        def memory_info(device=None):
            if not present:
                raise RuntimeError("Cannot access accelerator device when none is available.")
            unit = self._unit(accelerator, device) if accelerator in self.MISSING else {}
            total = unit.get("total_memory", 0)  # MPS: unified memory, not reported here
            return (int(total * 0.95), total)

        return {
            "is_available": lambda: present,
            "current_accelerator": lambda check_available=False: (
                torch.device(accelerator) if present else None),
            "device_count": lambda: len(units),
            "current_device_index": lambda: self._current if present else -1,
            "current_device_idx": lambda: self._current if present else -1,
            "set_device_index": set_device, "set_device_idx": set_device,
            "synchronize": self._accelerator_synchronize,
            "empty_cache": nothing, "reset_peak_memory_stats": nothing,
            "memory_allocated": zero, "memory_reserved": zero, "max_memory_allocated": zero,
            "get_memory_info": memory_info,
        }

    def __enter__(self):
        import importlib
        import inspect

        import torch

        replacements = [(torch.version, "cuda", self.spec.get("cuda_version"))]
        for name in ("_exchange_device", "_maybe_exchange_device"):  # `with torch.cuda.device(i)`
            replacements.append((torch.cuda, name, self._exchange))
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

    def _exchange(self, index):
        """Make GPU ``index`` current (a negative index changes nothing); return the previous."""
        previous = self._current
        if index >= 0:
            self._current = index
            self._unit("cuda")
        return previous

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

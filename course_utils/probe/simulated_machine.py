"""Make torch's device queries answer as another machine would."""
from .facts import NotSimulated
from .instruments import patched


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
        self._current = 0  # torch.cuda.current_device()

    def _index_of(self, device=None) -> int:
        import torch

        if device is None:
            return self._current
        if isinstance(device, int):
            return device
        index = torch.device(device).index  # torch.device("cuda"): the current GPU
        return self._current if index is None else index

    def _gpu(self, device=None) -> dict:
        """The spec of the GPU ``device`` names (the current one by default), as CUDA refuses."""
        index, gpus = self._index_of(device), self.spec["gpus"]
        if not gpus:
            raise RuntimeError("No CUDA GPUs are available")
        if not 0 <= index < len(gpus):
            raise RuntimeError("Invalid device id")  # what CUDA says for cuda:N, N too big
        return gpus[index]

    def _cuda_synchronize(self, device=None):
        import torch

        if not self.spec["gpus"]:
            self._gpu()  # raises first, as torch's lazy initialisation does
        if isinstance(device, (str, torch.device)) and torch.device(device).type != "cuda":
            raise ValueError(f"Expected a cuda device, but got: {device}")  # torch's words
        self._gpu(device)

    def _accelerator_synchronize(self, device=None):
        import torch

        accelerator = "cuda" if self.spec["gpus"] else ("mps" if self.spec["mps"] else None)
        if accelerator is None:
            raise RuntimeError("Cannot access accelerator device when none is available.")
        kind = torch.device(device).type if isinstance(device, (str, torch.device)) \
            else accelerator
        if kind != accelerator:  # torch's words for a device of another type
            raise ValueError(f"{kind} doesn't match the current accelerator "
                             f"{torch.device(accelerator)}.")
        if accelerator == "cuda":
            self._gpu(device)

    def _answers(self):
        import types

        import torch

        gpus, mps = self.spec["gpus"], bool(self.spec["mps"])
        self._current = 0  # each simulation starts on GPU 0
        accelerator = "cuda" if gpus else ("mps" if mps else None)
        gpu = self._gpu

        class Properties(types.SimpleNamespace):
            def __getattr__(self, name):
                raise NotSimulated(f"torch.cuda.get_device_properties(...).{name}")

        def set_device(device):
            self._current = self._index_of(device)
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
                "current_device": lambda: (gpu(), self._current)[1],
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
                "synchronize": self._cuda_synchronize,
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
                "current_device_index": lambda: self._current if accelerator else -1,
                "current_device_idx": lambda: self._current if accelerator else -1,
                "set_device_index": set_device, "set_device_idx": set_device,
                "synchronize": self._accelerator_synchronize,
                "empty_cache": nothing,
            },
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
            self._gpu()
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

"""A clock that moves only when the probe says so, and devices that run work later."""
from .facts import StopProbe
from .instruments import patched


class SimulatedClock:
    """A clock that moves only when the probe says so, and devices that run work later.

    While active, ``time.perf_counter``, ``time.time``, ``time.monotonic``, their ``_ns``
    forms, ``timeit.default_timer`` and a ``timeit.Timer`` built on any of them (as
    ``timeit.repeat`` builds one) read :attr:`now` in the probe's thread (other threads get
    the real time), and ``torch.cuda.Event``/``torch.Event`` record when the device reaches
    them; ``torch.cuda.synchronize``, ``torch.mps.synchronize``, ``torch.xpu.synchronize``
    and ``torch.accelerator.synchronize`` first answer as the active
    :class:`SimulatedMachine` would (raising where it raises), then wait for that device's
    queued work. The probe spends time with :meth:`cpu` (the CPU works before returning) and
    :meth:`launch` (work queued on a device, 'cuda:0', 'xpu:0' or 'mps', that runs after what
    is queued there already).
    ``log`` (shareable) gets ``{"event": "clock", "pending": [devices still busy]}`` per
    reading and ``{"event": "sync", "api": ..., "device": ...}`` per synchronisation
    (device None when the call raised); past ``limit`` entries a :class:`StopProbe` ends
    the learner's code, so a loop waiting for this clock cannot hang. ``namespaces`` (e.g.
    the learner's function's ``__globals__``) get the simulated clocks too, in place of names
    bound to the real ones (``from time import perf_counter``); so do the defaults and the
    closure of each of ``functions`` (``def f(..., clock=time.perf_counter)``), and their
    globals.
    """

    CLOCKS = ("perf_counter", "time", "monotonic")

    def __init__(self, log=None, start=1000.0, limit=5000, namespaces=(), functions=()):
        self.now, self.busy_until = float(start), {}
        self.log = [] if log is None else log
        self.limit, self.namespaces = limit, list(namespaces)
        self.functions = [f for f in functions if hasattr(f, "__code__")]
        self._patch, self._undo = None, []

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

        def indexed(kind):
            def which(device=None):  # 'xpu:0': the device named, else the current one
                index = device if isinstance(device, int) else (
                    None if device is None else torch.device(device).index)
                current = torch.accelerator.current_device_index() if index is None else index
                return f"{kind}:{current}"
            return which

        def accelerator(device=None):
            kind = torch.accelerator.current_accelerator().type
            if kind == "mps":  # one device, which its queue is named after
                return kind
            return cuda(device) if kind == "cuda" else indexed(kind)(device)

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
        timer_init = timeit.Timer.__init__

        def simulated_timer(timer_self, stmt="pass", setup="pass", timer=timeit.default_timer,
                            globals=None):
            # timeit.repeat and timeit.timeit bound the real clock as a default when imported.
            return timer_init(timer_self, stmt, setup, simulated.get(id(timer), timer), globals)

        self._patch = patched(clocks + [
            (timeit.Timer, "__init__", simulated_timer),
            (torch.cuda, "Event", self._event_class(cuda)),
            (torch, "Event", self._event_class(accelerator)),
            sync(torch.cuda, "torch.cuda.synchronize", cuda),
            sync(torch.mps, "torch.mps.synchronize", lambda: "mps"),
            sync(torch.xpu, "torch.xpu.synchronize", indexed("xpu")),
            sync(torch.accelerator, "torch.accelerator.synchronize", accelerator)]).__enter__()
        self._rebind_learner(simulated)
        return self

    def _event_class(self, which):
        """torch.cuda.Event / torch.Event on this clock: record() marks the moment the device
        reaches it in its queue, elapsed_time() is in milliseconds, as torch's."""
        clock = self

        class Event:
            def __init__(self, device=None, enable_timing=False, blocking=False,
                         interprocess=False):
                if isinstance(device, bool):  # torch.cuda.Event(enable_timing, ...) by position
                    device, enable_timing = None, device
                self.device, self.enable_timing, self.at, self.queue = device, enable_timing, \
                    None, None

            def record(self, stream=None):
                import torch

                kind = torch.device(self.device).type if self.device is not None else (
                    getattr(torch.accelerator.current_accelerator(), "type", "cpu"))
                if kind == "cpu":
                    raise RuntimeError("cpu backend doesn't support events.")  # torch's words
                self.queue = which(self.device)
                self.at = max(clock.now, clock.busy_until.get(self.queue, clock.now))
                clock._note({"event": "clock", "pending": [], "api": "Event.record",
                             "device": self.queue})

            def query(self):
                return self.at is not None and clock.now >= self.at

            def synchronize(self):
                clock._note({"event": "sync", "api": "Event.synchronize", "device": self.queue})
                clock.now = max(clock.now, self.at or clock.now)

            def wait(self, stream=None):
                pass

            def elapsed_time(self, end):
                if not (self.enable_timing and end.enable_timing):
                    raise RuntimeError("Both events must be created with argument "
                                       "'enable_timing=True'.")
                if not (self.query() and end.query()):
                    clock._note({"event": "unfinished", "api": "Event.elapsed_time"})
                    raise RuntimeError("Both events must be recorded and completed before "
                                       "calculating elapsed time.")
                return (end.at - self.at) * 1e3

        return Event

    def _rebind_learner(self, simulated):
        """The simulated clocks in place of real ones bound in the learner's code."""
        namespaces = self.namespaces + [f.__globals__ for f in self.functions] \
            + [f.__kwdefaults__ for f in self.functions if f.__kwdefaults__]
        for namespace in {id(namespace): namespace for namespace in namespaces}.values():
            for key, value in list(namespace.items()):
                self._rebind(simulated, value, lambda v, ns=namespace, k=key: ns.update({k: v}))
        for function in self.functions:
            for cell in function.__closure__ or ():
                try:
                    value = cell.cell_contents
                except ValueError:  # a cell not filled yet
                    continue
                self._rebind(simulated, value,
                             lambda v, cell=cell: setattr(cell, "cell_contents", v))
            defaults = function.__defaults__ or ()
            if any(id(value) in simulated for value in defaults):
                self._rebind({id(defaults): tuple(simulated.get(id(v), v) for v in defaults)},
                             defaults, lambda v, f=function: setattr(f, "__defaults__", v))

    def _rebind(self, simulated, value, put):
        """Put the simulated clock where ``value``, a real one, was; undone on exit."""
        if id(value) in simulated:
            put(simulated[id(value)])
            self._undo.append(lambda: put(value))

    def __exit__(self, *exc_info):
        for undo in reversed(self._undo):
            undo()
        self._undo.clear()
        return self._patch.__exit__(*exc_info)

"""A world of one process whose every all-reduce leaves a mark in what it reduces.

In a one-process gloo group an all-reduce returns its input: whether an answer all-reduced
once or on every micro-batch, through DDP's hook, a second DDP wrapper or ``dist.all_reduce``
by hand, nothing in the weights tells. This group stands in for the other ranks instead: every
all-reduce on it multiplies what it reduces by ``scale`` (drawn by the grader) and is logged.
It is the default group while the probe runs, so a collective the answer issues without naming
a group lands on it too; the learner's own default group (a notebook's demo made one) comes
back afterwards. A group the answer makes with ``dist.new_group`` fails: this one is not in
c10d's registry.
"""


def marked_world(scale, log):
    """A context manager: while it is open, the default process group is a world of one whose
    all-reduces multiply their tensors by ``scale`` and append "all-reduce" to ``log``."""
    import contextlib

    import torch.distributed as dist
    from torch._C._distributed_c10d import _create_work_from_future
    from torch.distributed import distributed_c10d
    from torch.futures import Future

    def finished(result):
        future = Future()
        future.set_result(result)
        return _create_work_from_future(future)

    class MarkedWorld(dist.ProcessGroup):
        """Rank 0 of 1; the log and the scale live in this closure, not on the object."""

        def allreduce(self, tensors, opts=None):
            log.append("all-reduce")
            for tensor in tensors:
                tensor.mul_(scale)
            return finished(tensors)

        def allreduce_coalesced(self, tensors, opts=None):
            return self.allreduce(tensors, opts)

        def allgather(self, outputs, inputs, opts=None):  # DDP compares shapes at the start
            for gathered, tensor in zip(outputs, inputs, strict=True):
                for output in gathered:
                    output.copy_(tensor)
            return finished(outputs)

        def broadcast(self, tensors, opts=None):  # rank 0's weights and buffers: already here
            return finished(tensors)

        def barrier(self, opts=None):
            return finished([])

        def getBackendName(self):
            return "course-probe"

    @contextlib.contextmanager
    def opened():
        world = distributed_c10d._world
        previous, group = world.default_pg, MarkedWorld(0, 1)
        world.default_pg = group
        try:
            yield group
        finally:
            world.default_pg = previous
    return opened()

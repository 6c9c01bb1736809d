"""show_error prints one line and keeps nothing of the failed block alive."""
from __future__ import annotations

import gc
import weakref

from course_utils.lab.errors import show_error


class Resource:
    """Stands in for what a failed block held: a DataLoader iterator, a step's tensors."""


def test_show_error_prints_the_message_and_keeps_the_error(capsys):
    with show_error(ValueError) as shown:
        raise ValueError("bad value 3")
    assert shown.raised and str(shown.error) == "bad value 3"
    assert capsys.readouterr().out.startswith("ValueError: bad value 3")


def test_the_failed_block_is_freed_at_once_not_by_a_later_garbage_collection():
    """A cycle through the traceback would free it whenever the collector runs: in lesson 04,
    inside forked DataLoader workers, where a collected iterator prints a traceback storm."""
    held = []

    def fail():
        resource = Resource()
        held.append(weakref.ref(resource))
        try:
            raise KeyError("inner")
        except KeyError as inner:
            raise RuntimeError("outer") from inner

    gc.disable()
    try:
        with show_error(RuntimeError) as shown:
            fail()
        assert held[0]() is None, "the failed block's locals outlived show_error"
    finally:
        gc.enable()
    assert shown.error.__traceback__ is None and shown.error.__cause__.__traceback__ is None


def test_a_long_message_is_shown_whole_up_to_its_advice():
    """Checks show_error prints a long error's end (PyTorch's out-of-memory advice comes after
    character 400) and cuts only a pathological one."""
    from course_utils.lab.errors import MESSAGE_CHARS, short_error

    advice = "If reserved but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF"
    text = short_error(RuntimeError("CUDA out of memory. " + "x" * 500 + " " + advice))
    assert text.endswith(advice)
    huge = short_error(RuntimeError("y" * (3 * MESSAGE_CHARS)))
    assert len(huge) < MESSAGE_CHARS + 100 and huge.endswith("[...]")

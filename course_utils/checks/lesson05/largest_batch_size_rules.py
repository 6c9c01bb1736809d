"""largest_batch_size's rules on the trusted side: the sizes a right answer tries, and what the
probe saw of a search that stopped early or never started (calls to step(), turns of the loop)."""
from __future__ import annotations

from ..framework import fail


def halving_sizes(start: int) -> list[int]:
    return [start >> i for i in range(start.bit_length())]  # start, start // 2, ..., 1


def success(inputs: dict) -> str:
    fits = "; ".join(f"start {s['start']}, fits up to {s['limit']}" for s in inputs["fits"])
    return (f"largest_batch_size() halves to the largest size that fits ({fits}), retries outside "
            "the except block, raises when even 1 does not fit and lets other errors through.")


def _turns(result: dict) -> str:
    """What the probe saw of the loop in largest_batch_size()'s own code."""
    turns = result["loop_turns"]
    return "its code never went round a loop" if turns == 0 else \
        f"its loop went round {turns} time{'s' * (turns != 1)}"


def tried_sizes(result: dict, where: str) -> list[int]:
    """The sizes passed to step(); fails when the answer did not stop."""
    sizes = [call["size"].get("value") for call in result["calls"]]
    if result["loop_stopped"]:  # the probe stopped a loop that did not end
        fail(f"{where}, largest_batch_size() went round its loop {result['loop_turns']} times "
             + (f"but called step() only {len(sizes)} times; the check stopped it there."
                if sizes else
                "without calling step(): no step ran, so no OutOfMemoryError was ever raised "
                "or caught; the check stopped it there."),
             "call step(batch_size) inside the loop, in a `try` block; on "
             "torch.OutOfMemoryError halve the size, otherwise return it.")
    if result["stopped"]:  # the sizes tell a loop stuck at 1 from one that does not halve
        fail(f"{where}, largest_batch_size() called step() 30 times without stopping: it tried "
             f"{', '.join(map(str, sizes[:5]))}, ..., {sizes[-1]}.",
             "halve the batch size after each out-of-memory error, and stop after trying 1.")
    return sizes


def never_called(result: dict) -> str:
    """The end of a sentence for an answer that returned without calling step()."""
    return (f": it never called step() and returned {result['returned'].get('value')!r} "
            f"({_turns(result)})")

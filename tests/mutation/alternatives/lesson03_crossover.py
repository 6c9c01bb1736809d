"""Right alternatives: copied from tests/test_checks_lesson03.py, and own."""
from __future__ import annotations

import numpy as np


def crossover_from_the_end(sizes, cpu_times, acc_times):
    """Right: walk back from the largest size while the accelerator wins."""
    found = None
    for index in reversed(range(len(sizes))):
        if not acc_times[index] < cpu_times[index]:
            break
        found = sizes[index]
    return found


def crossover_with_all(sizes, cpu_times, acc_times):
    """Right: the first index from which every later pair is a win."""
    pairs = list(zip(cpu_times, acc_times, strict=True))
    for index, size in enumerate(sizes):
        if all(acc < cpu for cpu, acc in pairs[index:]):
            return size
    return None


def crossover_with_numpy(sizes, cpu_times, acc_times):
    """Right: NumPy does the comparison and the size comes back as a NumPy integer."""
    wins = np.asarray(acc_times) < np.asarray(cpu_times)
    losses = np.flatnonzero(~wins)
    first = losses[-1] + 1 if losses.size else 0
    return np.asarray(sizes)[first] if first < len(sizes) else None


def crossover_with_a_flag_list(sizes, cpu_times, acc_times):
    """Right: a list of wins, then the last loss found with a reversed index."""
    wins = [acc < cpu for cpu, acc in zip(cpu_times, acc_times, strict=True)]
    if not wins[-1]:
        return None
    last_loss = max((i for i, win in enumerate(wins) if not win), default=-1)
    return sizes[last_loss + 1]


def crossover_with_a_while_loop(sizes, cpu_times, acc_times):
    """Right: a while loop from the end, on tuples of numbers (any sequence works)."""
    sizes, cpu_times, acc_times = tuple(sizes), tuple(cpu_times), tuple(acc_times)
    index = len(sizes)
    while index > 0 and acc_times[index - 1] < cpu_times[index - 1]:
        index -= 1
    return sizes[index] if index < len(sizes) else None


ALTERNATIVES = [crossover_from_the_end, crossover_with_all, crossover_with_numpy,
                crossover_with_a_flag_list, crossover_with_a_while_loop]

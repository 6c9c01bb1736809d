"""Right alternatives: imported from tests/checks/lesson03/test_crossover.py."""
from __future__ import annotations

from ...checks.lesson03.test_crossover import (
    crossover_from_the_end,
    crossover_with_a_flag_list,
    crossover_with_a_while_loop,
    crossover_with_all,
    crossover_with_numpy,
)

ALTERNATIVES = [crossover_from_the_end, crossover_with_all, crossover_with_numpy,
                crossover_with_a_flag_list, crossover_with_a_while_loop]

"""``python -m course_utils.lab.distributed SCRIPT [ARGS]``: what torchrun starts in each rank."""
import sys

from .rank import run_rank

sys.exit(run_rank(sys.argv[1:]))

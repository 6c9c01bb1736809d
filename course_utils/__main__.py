"""``python -m course_utils`` is the ``course`` command."""
import sys

from .tools.cli import main

sys.exit(main())

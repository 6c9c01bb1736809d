"""Checks for lesson 05, "GPU memory and out-of-memory"."""

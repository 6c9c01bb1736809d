"""Checks for lesson 04, "Feeding the GPU"."""

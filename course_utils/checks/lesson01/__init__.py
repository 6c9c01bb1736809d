"""Checks for lesson 01, "Tensors and devices"."""

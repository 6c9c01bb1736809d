"""Checks for lesson 06, "Mixed precision"."""

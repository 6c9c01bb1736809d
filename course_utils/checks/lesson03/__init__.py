"""Checks for lesson 03, "Is the GPU really faster?"."""

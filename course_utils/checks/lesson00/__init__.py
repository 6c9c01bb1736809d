"""Checks for lesson 00, "Is there a GPU?"."""

"""Checks for lesson 08, "Removing overhead"."""

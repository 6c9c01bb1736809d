"""The commands: ``course`` (cli), doctor, release, exchange and notebook hygiene.

The top wing: may import every other part of the package (docs/architecture.md).
"""

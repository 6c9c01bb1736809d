"""Lesson 09's checks: sharding, ZeRO, FSDP2 and the cost of communication."""

"""Checks for lesson 07, "More than one GPU: DataParallel vs DistributedDataParallel"."""

"""Trace replay: reading trace files, their formats, selection, hash-id blocks, replay plans."""

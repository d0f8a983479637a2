"""`llmload calibrate`: how many streams one load process times exactly on this machine."""

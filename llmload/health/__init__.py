"""The client judging itself inside Locust processes: stalls, machine load, GC policy, calibration."""

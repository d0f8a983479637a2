"""Helpers shared by tests: processes, Locust runs, fixtures' data. No test module imports another."""

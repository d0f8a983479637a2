"""Scenario YAML to a frozen spec: reading, line numbers, sections."""

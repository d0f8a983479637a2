"""What a start from the web UI may change (issue 19, row 3).

Locust's ``/swarm`` sets every posted key that names a parsed option, not only the form's fields,
and it has no CSRF token. llmload reads its options again at each test start, so a posted
``csv_prefix`` would create files anywhere, and ``calibration=/dev/zero`` would be read. So at each
test start of a web-UI session the options are compared with those of the launch: a key the form
does not show, or one that names a file, goes back to its launch value, with one warning each.

Pure: the options are plain dicts (``vars(environment.parsed_options)``).

Usage::

    guard = FormGuard(vars(environment.parsed_options))        # at init
    for warning in guard.restore(vars(environment.parsed_options)):  # at each test start
        log.warning(warning)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# Locust's own fields of the start form, which a start is meant to change.
LOCUST_FORM = frozenset({"num_users", "user_count", "spawn_rate", "host", "run_time", "user_classes",
                         "shape_class", "profile"})
# Options (argparse dests) that open or write a file: never from the form, whatever it shows.
FILE_OPTIONS = frozenset({"csv_prefix", "calibration", "ca_bundle", "html_file", "json_file", "logfile",
                          "locustfile", "config", "stats_history_file", "csv_full_history"})


def is_scenario_path(value: Any) -> bool:
    """A scenario given as a file path (not one of the built-in names) opens a file."""
    text = str(value or "")
    return "/" in text or "\\" in text or text.endswith((".yaml", ".yml"))


class FormGuard:
    """The launch's options, and which keys the web form may change."""

    def __init__(self, launch: dict[str, Any], form_keys: Iterable[str] = ()) -> None:
        self.launch = dict(launch)
        self.form_keys = (frozenset(form_keys) | LOCUST_FORM) - FILE_OPTIONS

    def restore(self, current: dict[str, Any]) -> list[str]:
        """Put back every changed value the form may not change; one warning per key put back."""
        warnings = []
        for key, value in list(current.items()):
            if key not in self.launch:
                continue
            before = self.launch[key]
            if value == before:
                continue
            allowed = key in self.form_keys and not (key == "scenario" and is_scenario_path(value))
            if allowed:
                continue
            current[key] = before
            why = "names a file" if key in FILE_OPTIONS or key == "scenario" else "is not a field of the form"
            warnings.append(f"web UI: the start asked to change {key} ({why}); kept the launch value "
                            f"{before!r}. Change it on the command line.")
        return warnings

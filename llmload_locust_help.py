"""Show llmload's options in ``locust -f LOCUSTFILE --help``.

Locust prints its help before it imports the locustfile, so options that llmload registers when
the locustfile imports it never reach that page. ``llmload-locust-help.pth`` imports this module
at interpreter start-up; it does nothing unless this process is ``locust`` asked for ``--help``
with a locustfile that uses llmload, and then registers the options before Locust builds its
parser. Nothing else is imported at start-up.
"""

from __future__ import annotations

import os
import sys


def _locust_help_for_llmload(argv: list[str]) -> bool:
    args = argv[1:]
    if not args:
        return False
    if args[:2] == ["-m", "locust"]:
        args = args[2:]
    elif os.path.basename(args[0] if argv[0].endswith(("python", "python3")) else argv[0]) != "locust":
        return False
    if "-h" not in args and "--help" not in args:
        return False
    files = ["locustfile.py"]
    for i, a in enumerate(args):
        if a in ("-f", "--locustfile") and i + 1 < len(args):
            files = args[i + 1].split(",")
        elif a.startswith("--locustfile="):
            files = a.split("=", 1)[1].split(",")
    for path in files:
        try:
            with open(path.strip(), encoding="utf-8", errors="replace") as f:
                if "llmload" in f.read(1 << 16):
                    return True
        except OSError:
            continue
    return False


def _install() -> None:
    if not _locust_help_for_llmload(list(getattr(sys, "orig_argv", sys.argv))):
        return
    try:
        from locust import events

        from llmload.plugin.options.flags import add_arguments
    except Exception:  # a broken install must never break the interpreter's start-up
        return
    events.init_command_line_parser.add_listener(add_arguments)


_install()

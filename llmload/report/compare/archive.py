"""The archive of runs: one SQLite file (stdlib ``sqlite3``) that ``llmload report`` and
``llmload sweep`` add each run to, ``llmload history`` lists and ``compare --baseline`` reads.

Schema version 2 (``meta.schema_version``); :data:`MIGRATIONS` brings any older file up to date
when it is opened, in one transaction per step:

* ``runs``: one row per archived run: ``id`` (the archive's), ``run_id`` (the run's own, from
  PREFIX_run.json), ``added_at`` (UTC ISO), ``source`` (report or sweep), ``prefix`` (absolute: the
  CSVs ``--baseline`` reads), ``host``, ``model``, ``engine`` and ``engine_version`` (as the server's
  /v1/models answer names them), ``llmload_version``, ``command_line`` (redacted by the run),
  ``machine`` (JSON), ``capacity``, ``cost``, ``plan``, ``manifest`` (JSON), and for a sweep's cells
  ``sweep`` (its folder) and ``cell`` (the cell id);
* ``steps``: the step table, one row per step (``run`` → runs.id), with the step's JSON in ``data``.

The default file is ``$LLMLOAD_ARCHIVE`` when set, else ``~/.local/share/llmload/runs.sqlite``;
``LLMLOAD_ARCHIVE=off`` turns the archive off (as ``--no-archive`` does). The command that creates
the file says so, once (:func:`created_note`): a file under the home directory must not appear unannounced.

Usage::

    with Archive.open("runs.sqlite") as a:
        rid = a.add(report, source="report")
        a.runs(model="llama", since="2026-11-01")     # newest first
        a.get("last")["prefix"]
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import sqlite3
from typing import Any

from llmload import __version__

SCHEMA_VERSION = 2
ENV = "LLMLOAD_ARCHIVE"

_V1 = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT, added_at TEXT NOT NULL, source TEXT NOT NULL,
                   prefix TEXT NOT NULL, host TEXT, model TEXT, llmload_version TEXT, command_line TEXT,
                   machine TEXT, capacity TEXT, manifest TEXT);
CREATE TABLE steps (run INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, level REAL, users INTEGER,
                    rps REAL, output_tps REAL, ttft_p95_ms REAL, tpot_p95_ms REAL, slo_met INTEGER, data TEXT);
CREATE INDEX runs_added ON runs(added_at);
INSERT INTO meta VALUES ('schema_version', '1');
"""
# version n → n + 1
MIGRATIONS: dict[int, str] = {
    1: """
ALTER TABLE runs ADD COLUMN engine TEXT;
ALTER TABLE runs ADD COLUMN engine_version TEXT;
ALTER TABLE runs ADD COLUMN cost TEXT;
ALTER TABLE runs ADD COLUMN plan TEXT;
ALTER TABLE runs ADD COLUMN sweep TEXT;
ALTER TABLE runs ADD COLUMN cell TEXT;
CREATE INDEX runs_model ON runs(model);
""",
}


class ArchiveError(RuntimeError):
    """The archive file cannot be used; the message names it and the fix."""


OFF = "off"  # LLMLOAD_ARCHIVE=off: no archive, as --no-archive


def turned_off() -> bool:
    return os.environ.get(ENV, "").strip().lower() == OFF


def default_path() -> str | None:
    """The archive's file; None when ``LLMLOAD_ARCHIVE=off``."""
    if turned_off():
        return None
    return os.environ.get(ENV) or os.path.join(os.path.expanduser("~"), ".local", "share", "llmload", "runs.sqlite")


def created_note(command: str, path: str) -> str:
    """The one line the command that created the archive prints."""
    return (f"llmload {command}: started the run archive {path} (every report and sweep cell is added; "
            f"`llmload history` lists them); --no-archive or {ENV}=off turns it off")


def _version(db: sqlite3.Connection) -> int:
    try:
        row = db.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    except sqlite3.OperationalError:
        return 0
    return int(row[0]) if row else 0


def migrate(db: sqlite3.Connection) -> int:
    """Create or upgrade the schema to :data:`SCHEMA_VERSION`; the version it was at."""
    was = _version(db)
    if was > SCHEMA_VERSION:
        raise ArchiveError(f"schema version {was} is newer than this llmload's ({SCHEMA_VERSION}): upgrade llmload")
    if was == 0:
        db.executescript("BEGIN;" + _V1 + "COMMIT;")
    for v in range(max(was, 1), SCHEMA_VERSION):
        db.executescript("BEGIN;" + MIGRATIONS[v] + f"UPDATE meta SET value = '{v + 1}' "
                         "WHERE key = 'schema_version'; COMMIT;")
    return was


def _js(v: Any) -> str | None:
    return None if v is None else json.dumps(v, default=str)


def machine() -> dict[str, Any]:
    return {"hostname": platform.node(), "system": platform.system(), "release": platform.release(),
            "machine": platform.machine(), "python": platform.python_version(), "cpus": os.cpu_count()}


def _engine(manifest: dict[str, Any]) -> tuple[str | None, str | None]:
    data = ((manifest.get("models") or {}).get("data") or [{}]) if isinstance(manifest.get("models"), dict) else [{}]
    first = data[0] if data and isinstance(data[0], dict) else {}
    return first.get("owned_by"), first.get("version") or manifest.get("server_version")


class Archive:
    def __init__(self, db: sqlite3.Connection, path: str, created: bool = False) -> None:
        self.db = db
        self.path = path
        self.created = created
        """This open made the file (the first write: the command says where it is)."""

    @classmethod
    def open(cls, path: str | None = None) -> Archive:
        path = path or default_path()
        if path is None:
            raise ArchiveError(f"the archive is turned off ({ENV}=off); give --archive PATH to use one")
        created = not os.path.exists(path)
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            db = sqlite3.connect(path, isolation_level=None, timeout=30)
            db.row_factory = sqlite3.Row
            migrate(db)
        except (OSError, sqlite3.Error) as e:
            raise ArchiveError(f"archive {path}: {e}; give another --archive PATH or --no-archive") from None
        return cls(db, path, created)

    def __enter__(self) -> Archive:
        return self

    def __exit__(self, *exc: object) -> None:
        self.db.close()

    def add(self, report: Any, source: str = "report", sweep: str | None = None, cell: str | None = None) -> int:
        """Archive a built :class:`llmload.report.Report`; the archive's id of it."""
        m = report.manifest or {}
        o = report.overall
        engine, version = _engine(m)
        prefix = os.path.abspath(report.source.split(", ")[0])
        now = dt.datetime.now(dt.UTC).isoformat(timespec="seconds")
        cmd = m.get("command_line")
        self.db.execute("BEGIN")
        cur = self.db.execute(
            "INSERT INTO runs (run_id, added_at, source, prefix, host, model, engine, engine_version, "
            "llmload_version, command_line, machine, capacity, cost, plan, manifest, sweep, cell) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (report.run_id, now, source, prefix, m.get("host"), m.get("model"), engine, version,
             m.get("llmload_version") or __version__, " ".join(cmd) if isinstance(cmd, list) else cmd,
             _js(machine()), _js(o.capacity), _js(o.cost), _js(o.plan), _js(m or None), sweep, cell))
        rid = int(cur.lastrowid or 0)
        self.db.executemany(
            "INSERT INTO steps VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [(rid, s.data["level"], s.data["users"], s.data["rps"], s.data["output_tps"], s.data["ttft_ms"]["p95"],
              s.data["tpot_ms"]["p95"], None if s.data["slo_met"] is None else int(s.data["slo_met"]), _js(s.data))
             for s in o.steps])
        self.db.execute("COMMIT")
        return rid

    def runs(self, model: str | None = None, host: str | None = None, since: str | None = None) -> list[dict]:
        where, args = [], []
        for col, val in (("model", model), ("host", host)):
            if val:
                where.append(f"{col} LIKE ?")
                args.append(f"%{val}%")
        if since:
            where.append("added_at >= ?")
            args.append(since)
        sql = "SELECT * FROM runs" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id DESC"
        return [dict(r) for r in self.db.execute(sql, args)]

    def get(self, which: str, exclude_run_ids: set[str] | None = None) -> dict:
        """``last`` (the newest run not among ``exclude_run_ids``), an archive id, or a run id."""
        if which == "last":
            for r in self.runs():
                if r["run_id"] is None or r["run_id"] not in (exclude_run_ids or set()):
                    return r
            raise ArchiveError(f"archive {self.path}: no run to compare against (it is empty)")
        row = self.db.execute("SELECT * FROM runs WHERE run_id = ? OR CAST(id AS TEXT) = ? ORDER BY id DESC",
                              (which, which)).fetchone()
        if row is None:
            raise ArchiveError(f"archive {self.path}: no run {which!r}; `llmload history` lists them")
        return dict(row)

    def steps(self, archive_id: int) -> list[dict]:
        return [json.loads(r["data"]) for r in self.db.execute("SELECT data FROM steps WHERE run = ?", (archive_id,))]


def history_text(rows: list[dict]) -> str:
    if not rows:
        return "no archived runs match"
    lines = [f"{'id':>4}  {'added (UTC)':20} {'source':6} {'model':20} {'capacity':>9}  {'$/month':>10}  "
             "run_id / prefix"]
    for r in rows:
        cap = json.loads(r["capacity"] or "{}")
        plan = json.loads(r.get("plan") or "null") or {}
        month = plan.get("usd_per_month")
        lines.append(f"{r['id']:>4}  {r['added_at'][:19]:20} {r['source']:6} {str(r['model'] or '–')[:20]:20} "
                     f"{'–' if cap.get('level') is None else format(cap['level'], 'g'):>9}  "
                     f"{'–' if month is None else f'{month:,.2f}':>10}  "
                     f"{r['run_id'] or '–'} {r['prefix']}" + (f" (cell {r['cell']})" if r.get("cell") else ""))
    return "\n".join(lines)

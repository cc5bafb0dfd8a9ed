"""The peer's own records: one SQLite file shared by the activities (writes) and the HTTP front
(reads, and the inventory writes).

Opened with journal_mode=WAL and synchronous=FULL, the durability our own store has: a commit
returns only after its WAL frames are fsync'd. Not imported by the workflow code (a workflow never
touches a database; only activities do).
"""

import os
import sqlite3
import threading
import time

SCHEMA = """
CREATE TABLE IF NOT EXISTS skus (
    sku         TEXT PRIMARY KEY,
    available   INTEGER NOT NULL CHECK (available >= 0),
    price_cents INTEGER NOT NULL,
    given       INTEGER NOT NULL              -- stock given to it over time, cumulatively
);
CREATE TABLE IF NOT EXISTS reservations (
    order_id    TEXT NOT NULL,
    sku         TEXT NOT NULL,
    quantity    INTEGER NOT NULL,
    released    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (order_id, sku)
);
CREATE TABLE IF NOT EXISTS charges (
    order_id     TEXT PRIMARY KEY,             -- the idempotency key: one charge per order
    amount_cents INTEGER NOT NULL,
    refunded     INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS shipments (
    order_id    TEXT PRIMARY KEY,
    postal_code TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS orders (
    id          TEXT PRIMARY KEY,
    status      TEXT NOT NULL,
    reason      TEXT,
    updated_at  REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS orders_by_status ON orders (status);
"""

TERMINAL = ("COMPLETED", "CANCELLED")


def db_path() -> str:
    path = os.environ.get("PEER_DB")
    if not path:
        raise SystemExit("PEER_DB (the SQLite file of the peer's records) is not set")
    return path


def connect(path: str | None = None) -> sqlite3.Connection:
    """A connection in autocommit mode: every write is an explicit BEGIN IMMEDIATE ... COMMIT."""
    conn = sqlite3.connect(path or db_path(), isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=30000")  # writers queue on SQLite's one write lock
    return conn


def init_schema(path: str | None = None) -> None:
    conn = connect(path)
    try:
        conn.executescript(SCHEMA)
    finally:
        conn.close()


_local = threading.local()


def thread_conn() -> sqlite3.Connection:
    """One connection per thread (a sqlite3 connection is not shared between threads here)."""
    conn = getattr(_local, "conn", None)
    if conn is None:
        conn = connect()
        _local.conn = conn
    return conn


class write_txn:
    """`with write_txn() as c:` runs one write transaction, BEGIN IMMEDIATE so that a
    read-then-write never loses a race, COMMIT on success, ROLLBACK on an exception."""

    def __enter__(self) -> sqlite3.Connection:
        self.conn = thread_conn()
        self.conn.execute("BEGIN IMMEDIATE")
        return self.conn

    def __exit__(self, exc_type, exc, tb) -> bool:
        if exc_type is None:
            self.conn.execute("COMMIT")
        else:
            self.conn.execute("ROLLBACK")
        return False


def set_status(conn: sqlite3.Connection, order_id: str, status: str, reason: str | None = None) -> None:
    """Records an order's status inside the caller's transaction. A terminal status is never
    overwritten (a late retry of an earlier step cannot move a finished order back)."""
    conn.execute(
        """INSERT INTO orders (id, status, reason, updated_at) VALUES (?, ?, ?, ?)
           ON CONFLICT (id) DO UPDATE SET status = excluded.status, reason = excluded.reason,
                                          updated_at = excluded.updated_at
           WHERE orders.status NOT IN ('COMPLETED', 'CANCELLED')""",
        (order_id, status, reason, time.time()),
    )

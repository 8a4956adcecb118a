"""``--store sqlite:///PATH``: embedded and durable; a restart (even a SIGKILL) loses no stored response.

- WAL journal, ``synchronous=NORMAL``: a committed ``put`` survives the process
  being killed (it is in the WAL once the transaction commits); only an OS crash
  or power loss can lose the last transactions.
- The same bounds as the memory store (responses, bytes; bytes here are the
  encoded size on disk) with least-recently-used eviction: every hit stamps the
  row with a new use number, and eviction deletes the smallest. Conversations
  are bounded alike, apart from responses (at most ``max_responses`` of them and
  ``max_bytes`` of their fields and items; the one being written is never evicted).
- Totals are kept by triggers in the same transactions, so several processes
  may share one file and the bounds still hold.
- The item index is a table (item id → response) written in ``put``'s transaction and emptied of a
  response's items by a trigger when the response row goes (deleted, replaced or evicted); its rows'
  bytes count in their response's ``nbytes``. Responses stored by a release without the index are not
  in it (their items are found through their chain, as before).
- A response that continues a stored one (``StoredResponse.parent``) is a delta row: its own messages and
  calls (``codec.encode_stored``), its ``parent``, its ``depth`` below its chain's snapshot (a snapshot
  at least every ``SNAPSHOT_EVERY`` rows, so ``get`` reads at most that many rows, in one recursive
  query). A row others depend on (``dependants``) that is deleted or evicted is ``hidden``: it reads
  as unknown, leaves the item index and the count bound, and stays, counted to its scope's bytes,
  until its last dependant goes (docs/sessions-and-kv-cache.md#what-the-store-keeps). A replacing
  ``put`` renames such a row out of the way first. A file from before deltas (``user_version`` 0) gets
  the columns on opening, its rows read as snapshots; a file of a newer layout is refused.
- Blocking I/O never runs on the event loop: one dedicated thread owns the
  connection, and every call waits for it at most ``timeout`` seconds
  (then ServiceUnavailableError: a 503, never a hang).
"""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import threading
from collections.abc import Callable, Collection
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from ..adapter import RenderedMessage
from ..core import ServiceUnavailableError
from .base import (
    SNAPSHOT_EVERY,
    ConversationHead,
    ConversationItem,
    ConversationPage,
    StoredConversation,
    StoredResponse,
    StoreStats,
    item_ids,
    own_part,
)
from .codec import chain_of, decode_stored_chain, encode_stored
from .counters import SQLiteCounters

__all__ = ["SQLiteStore"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
#: An entry's own part of its history (``base.own_part``).
Own = tuple[tuple[RenderedMessage, ...], dict[str, str]]

#: Ids one ``IN (…)`` asks for (below SQLite's oldest limit of 999 variables).
_IDS_PER_QUERY = 500
#: An item index row's bytes beyond its two ids (row header, its primary-key and by-response index entries).
_INDEX_ROW = 64

_SCHEMA = """
CREATE TABLE IF NOT EXISTS responses (id TEXT PRIMARY KEY, data BLOB NOT NULL, nbytes INTEGER NOT NULL,
                                      used INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS responses_used ON responses(used);
CREATE TABLE IF NOT EXISTS totals (k TEXT PRIMARY KEY, v INTEGER NOT NULL);
INSERT OR IGNORE INTO totals VALUES ('responses', 0), ('bytes', 0), ('clock', 0), ('evictions', 0),
                                    ('rejected', 0);
CREATE TRIGGER IF NOT EXISTS responses_ins AFTER INSERT ON responses BEGIN
  UPDATE totals SET v = v + 1 WHERE k = 'responses';
  UPDATE totals SET v = v + new.nbytes WHERE k = 'bytes';
END;
CREATE TABLE IF NOT EXISTS conversations (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL,
                                          metadata BLOB NOT NULL, used INTEGER NOT NULL DEFAULT 0,
                                          nbytes INTEGER NOT NULL DEFAULT 0,
                                          item_count INTEGER NOT NULL DEFAULT 0,
                                          item_bytes INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS conversation_items (seq INTEGER PRIMARY KEY AUTOINCREMENT, conversation TEXT NOT NULL,
                                               item_id TEXT NOT NULL, data BLOB NOT NULL);
CREATE INDEX IF NOT EXISTS conversation_items_by_conversation ON conversation_items(conversation, seq);
CREATE TRIGGER IF NOT EXISTS responses_del AFTER DELETE ON responses BEGIN
  UPDATE totals SET v = v - 1 WHERE k = 'responses';
  UPDATE totals SET v = v - old.nbytes WHERE k = 'bytes';
END;
CREATE TABLE IF NOT EXISTS items (item_id TEXT PRIMARY KEY, response TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS items_by_response ON items(response);
CREATE TRIGGER IF NOT EXISTS responses_del_items AFTER DELETE ON responses BEGIN
  DELETE FROM items WHERE response = old.id;
END;
"""
#: After ``_bound_conversations`` brought a file from before conversations were bounded (or had heads)
#: up to date. A conversation's head (item count, items' bytes) is kept by triggers in the transaction
#: that writes its items, whichever process writes them; its ids are indexed.
_CONVERSATION_SCHEMA = """
CREATE INDEX IF NOT EXISTS conversations_used ON conversations(used);
CREATE INDEX IF NOT EXISTS conversation_items_by_id ON conversation_items(conversation, item_id);
CREATE TRIGGER IF NOT EXISTS conversation_items_ins AFTER INSERT ON conversation_items BEGIN
  UPDATE conversations SET item_count = item_count + 1, item_bytes = item_bytes + length(new.data)
  WHERE id = new.conversation;
END;
CREATE TRIGGER IF NOT EXISTS conversation_items_del AFTER DELETE ON conversation_items BEGIN
  UPDATE conversations SET item_count = item_count - 1, item_bytes = item_bytes - length(old.data)
  WHERE id = old.conversation;
END;
CREATE TRIGGER IF NOT EXISTS conversations_ins AFTER INSERT ON conversations BEGIN
  UPDATE totals SET v = v + 1 WHERE k = 'conversations';
  UPDATE totals SET v = v + new.nbytes WHERE k = 'conversation_bytes';
END;
CREATE TRIGGER IF NOT EXISTS conversations_del AFTER DELETE ON conversations BEGIN
  UPDATE totals SET v = v - 1 WHERE k = 'conversations';
  UPDATE totals SET v = v - old.nbytes WHERE k = 'conversation_bytes';
END;
CREATE TRIGGER IF NOT EXISTS conversations_size AFTER UPDATE OF nbytes ON conversations BEGIN
  UPDATE totals SET v = v + new.nbytes - old.nbytes WHERE k = 'conversation_bytes';
END;
"""

#: Each scope's bytes (``scope_bytes``; a scope is an id's prefix up to and including its first ``/``), kept
#: by triggers in the transaction that inserts, replaces, deletes or evicts a response, whichever process
#: writes. Created with the sums of the rows already there (``_count_scopes``), so an older file reads right.
_SCOPE = "substr({row}.id, 1, instr({row}.id, '/'))"
_SCOPE_TRIGGERS = (
    f"""CREATE TRIGGER responses_scope_ins AFTER INSERT ON responses BEGIN
  INSERT OR IGNORE INTO scope_bytes VALUES ({_SCOPE.format(row="new")}, 0);
  UPDATE scope_bytes SET v = v + new.nbytes WHERE scope = {_SCOPE.format(row="new")};
END""",
    f"""CREATE TRIGGER responses_scope_del AFTER DELETE ON responses BEGIN
  UPDATE scope_bytes SET v = v - old.nbytes WHERE scope = {_SCOPE.format(row="old")};
END""",
)


#: The layout this release writes (``PRAGMA user_version``): 0 was before deltas.
_VERSION = 2
#: The columns deltas added to ``responses`` (a file from before gets them, every row a snapshot).
_DELTA_COLUMNS = {
    "parent": "TEXT",
    "depth": "INTEGER NOT NULL DEFAULT 0",
    "dependants": "INTEGER NOT NULL DEFAULT 0",
    "hidden": "INTEGER NOT NULL DEFAULT 0",
    "messages": "INTEGER NOT NULL DEFAULT -1",
}
_DELTA_SCHEMA = (
    "CREATE INDEX IF NOT EXISTS responses_parent ON responses(parent) WHERE parent IS NOT NULL",
    "CREATE INDEX IF NOT EXISTS responses_visible ON responses(used) WHERE hidden = 0",
    "INSERT OR IGNORE INTO totals VALUES ('hidden', 0)",
    """CREATE TRIGGER IF NOT EXISTS responses_hide AFTER UPDATE OF hidden ON responses BEGIN
  UPDATE totals SET v = v + new.hidden - old.hidden WHERE k = 'hidden';
END""",
    """CREATE TRIGGER IF NOT EXISTS responses_del_hidden AFTER DELETE ON responses WHEN old.hidden BEGIN
  UPDATE totals SET v = v - 1 WHERE k = 'hidden';
END""",
)
#: A row and the rows it extends, up to its snapshot: the entry first, its snapshot last.
_CHAIN = f"""
WITH RECURSIVE up(id, parent, data, n) AS (
  SELECT id, parent, data, 0 FROM responses WHERE id = ?
  UNION ALL SELECT r.id, r.parent, r.data, up.n + 1 FROM responses r JOIN up ON r.id = up.parent
  WHERE up.n < {SNAPSHOT_EVERY})
SELECT data FROM up ORDER BY n
"""
#: The bytes of a parent's prefix read to extend its chain (its ids: at most SNAPSHOT_EVERY of them).
_PREFIX = 16384


def _items_bytes(items: list[ConversationItem]) -> int:
    return sum(len(item_id) + len(data) for item_id, data in items)


class SQLiteStore:
    """A durable LRU ResponseStore in one SQLite file, driven from a dedicated thread."""

    def __init__(
        self, path: str, max_responses: int = 10_000, max_bytes: int = 1 << 30, timeout: float = 5.0
    ) -> None:
        if max_responses < 1 or max_bytes < 1:
            raise ValueError("max_responses and max_bytes must be positive")
        self.path = path
        self.max_responses = max_responses
        self.max_bytes = max_bytes
        self.timeout = timeout
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sqlite-store")
        self._local = threading.local()
        self._thread.submit(self._connect).result()  # fail at startup, not on the first request
        self._counters = SQLiteCounters(self._run, self._connect)

    # -- the store thread --------------------------------------------------------------------

    def _connect(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(
                self.path, timeout=self.timeout, isolation_level=None, check_same_thread=True
            )
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
            self._bound_conversations(db)
            db.executescript(_CONVERSATION_SCHEMA)
            self._count_scopes(db)
            self._chain_rows(db)
            self._local.db = db
        return db

    @staticmethod
    def _bound_conversations(db: sqlite3.Connection) -> None:
        """Bring a file written before conversations were bounded up to date (once; any process may)."""
        with db:
            db.execute("BEGIN IMMEDIATE")
            columns = {row[1] for row in db.execute("PRAGMA table_info(conversations)")}
            if "used" not in columns:
                db.execute("ALTER TABLE conversations ADD COLUMN used INTEGER NOT NULL DEFAULT 0")
                db.execute("ALTER TABLE conversations ADD COLUMN nbytes INTEGER NOT NULL DEFAULT 0")
                db.execute(
                    "UPDATE conversations SET nbytes = length(metadata) + (SELECT COALESCE(SUM(length(item_id)"
                    " + length(data)), 0) FROM conversation_items WHERE conversation = conversations.id)"
                )
            if "item_count" not in columns:  # before heads: counted once, here
                db.execute("ALTER TABLE conversations ADD COLUMN item_count INTEGER NOT NULL DEFAULT 0")
                db.execute("ALTER TABLE conversations ADD COLUMN item_bytes INTEGER NOT NULL DEFAULT 0")
                db.execute(
                    "UPDATE conversations SET (item_count, item_bytes) = (SELECT COUNT(*),"
                    " COALESCE(SUM(length(data)), 0) FROM conversation_items"
                    " WHERE conversation = conversations.id)"
                )
            # Totals of a new file start at 0; an older file's are counted once, here.
            db.execute("INSERT OR IGNORE INTO totals SELECT 'conversations', COUNT(*) FROM conversations")
            db.execute(
                "INSERT OR IGNORE INTO totals SELECT 'conversation_bytes', COALESCE(SUM(nbytes), 0) FROM conversations"
            )

    @staticmethod
    def _count_scopes(db: sqlite3.Connection) -> None:
        """Give a file without per-scope sums its table, filled from its rows, and the triggers keeping it (in
        one transaction, so a put of another process is counted either in the fill or by the triggers)."""
        with db:
            db.execute("BEGIN IMMEDIATE")
            there = db.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'scope_bytes'")
            if there.fetchone() is not None:
                return
            db.execute("CREATE TABLE scope_bytes (scope TEXT PRIMARY KEY, v INTEGER NOT NULL)")
            scope = _SCOPE.format(row="responses")
            db.execute(f"INSERT INTO scope_bytes SELECT {scope}, SUM(nbytes) FROM responses GROUP BY {scope}")
            for trigger in _SCOPE_TRIGGERS:
                db.execute(trigger)

    @staticmethod
    def _chain_rows(db: sqlite3.Connection) -> None:
        """Give a file from before deltas their columns (its rows are snapshots); refuse a newer layout."""
        with db:
            db.execute("BEGIN IMMEDIATE")
            version = int(db.execute("PRAGMA user_version").fetchone()[0])
            if version > _VERSION:
                raise sqlite3.DatabaseError(
                    f"{version} is a newer store layout than this release's ({_VERSION}); not opened"
                )
            if version == _VERSION:
                return
            columns = {row[1] for row in db.execute("PRAGMA table_info(responses)")}
            for name, kind in _DELTA_COLUMNS.items():
                if name not in columns:
                    db.execute(f"ALTER TABLE responses ADD COLUMN {name} {kind}")
            for statement in _DELTA_SCHEMA:
                db.execute(statement)
            db.execute(f"PRAGMA user_version = {_VERSION}")

    def _tick(self, db: sqlite3.Connection) -> int:
        return int(db.execute("UPDATE totals SET v = v + 1 WHERE k = 'clock' RETURNING v").fetchone()[0])

    def _get(self, response_id: str) -> list[bytes] | None:
        """The row's bytes and those of the rows it extends (its snapshot first), marked used; None if unknown."""
        db = self._connect()
        with db:
            db.execute("BEGIN IMMEDIATE")
            tick = self._tick(db)
            if not db.execute(
                "UPDATE responses SET used = ? WHERE id = ? AND hidden = 0", (tick, response_id)
            ).rowcount:
                return None
            rows = db.execute(_CHAIN, (response_id,)).fetchall()
            return [bytes(row[0]) for row in reversed(rows)]

    def _touch(self, response_id: str) -> bool:
        db = self._connect()
        with db:
            db.execute("BEGIN IMMEDIATE")
            updated = db.execute(
                "UPDATE responses SET used = ? WHERE id = ? AND hidden = 0", (self._tick(db), response_id)
            ).rowcount
            return updated == 1

    def _put(self, entry: StoredResponse, own: Own | None, ids: tuple[str, ...]) -> bool:
        db = self._connect()
        with db:
            db.execute("BEGIN IMMEDIATE")
            data, parent, depth = self._encoded(db, entry, own)
            nbytes = len(data) + sum(_INDEX_ROW + len(i) + len(entry.id) for i in ids)
            if nbytes > self.max_bytes:
                db.execute("UPDATE totals SET v = v + 1 WHERE k = 'rejected'")
                return False
            self._replace(db, entry.id)
            db.execute(
                "INSERT INTO responses (id, data, nbytes, used, parent, depth, messages)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (entry.id, data, nbytes, self._tick(db), parent, depth, len(entry.history.messages)),
            )
            if parent is not None:
                db.execute("UPDATE responses SET dependants = dependants + 1 WHERE id = ?", (parent,))
            db.executemany(
                "INSERT OR REPLACE INTO items (item_id, response) VALUES (?, ?)",
                [(i, entry.id) for i in ids],
            )
            self._evict(db)
            return True

    @staticmethod
    def _encoded(
        db: sqlite3.Connection, entry: StoredResponse, own: Own | None
    ) -> tuple[bytes, str | None, int]:
        """What to store of ``entry``: a delta on its parent's row when that row is there, holds the history
        ``entry`` extends and its chain is shorter than SNAPSHOT_EVERY, else a snapshot; its parent and depth."""
        if own is not None and entry.parent is not None:
            parent = entry.parent.id
            row = db.execute(
                "SELECT depth, messages, substr(data, 1, ?) FROM responses WHERE id = ?", (_PREFIX, parent)
            ).fetchone()
            if (
                row is not None
                and row[1] == len(entry.parent.history.messages)
                and row[0] + 1 < SNAPSHOT_EVERY
            ):
                try:
                    chain = (*chain_of(bytes(row[2]))[1], parent)
                except ValueError:  # a prefix cut short: written whole instead
                    chain = ()
                if len(chain) == row[0] + 1:
                    return encode_stored(entry, chain, own), parent, len(chain)
        return encode_stored(entry), None, 0

    def _replace(self, db: sqlite3.Connection, response_id: str) -> None:
        """Make room for a new row of ``response_id``: the old one renamed and hidden while rows depend on it
        (they now name it by its new id), else removed."""
        row = db.execute("SELECT dependants FROM responses WHERE id = ?", (response_id,)).fetchone()
        if row is None:
            return
        if not row[0]:
            self._remove(db, response_id)
            return
        renamed = f"{response_id}\0{self._tick(db)}"  # the same scope: an id's prefix up to its first "/"
        db.execute("DELETE FROM items WHERE response = ?", (response_id,))
        db.execute("UPDATE responses SET id = ?, hidden = 1 WHERE id = ?", (renamed, response_id))
        db.execute("UPDATE responses SET parent = ? WHERE parent = ?", (renamed, response_id))

    @staticmethod
    def _remove(db: sqlite3.Connection, response_id: str) -> None:
        """Delete a row nothing depends on, and each hidden ancestor nothing else depends on then."""
        row = db.execute("DELETE FROM responses WHERE id = ? RETURNING parent", (response_id,)).fetchone()
        parent = None if row is None else row[0]
        while parent is not None:
            left, hidden, above = db.execute(
                "UPDATE responses SET dependants = dependants - 1 WHERE id = ? RETURNING dependants, hidden, parent",
                (parent,),
            ).fetchone()
            if left or not hidden:
                return
            db.execute("DELETE FROM responses WHERE id = ?", (parent,))
            parent = above

    def _leave(self, db: sqlite3.Connection, response_id: str, dependants: int) -> None:
        """A visible row leaves the API (deleted, evicted): hidden while rows depend on it, else removed."""
        if dependants:
            db.execute("UPDATE responses SET hidden = 1 WHERE id = ?", (response_id,))
            db.execute("DELETE FROM items WHERE response = ?", (response_id,))
        else:
            self._remove(db, response_id)

    def _evict(self, db: sqlite3.Connection) -> None:
        """Least recently used visible rows leave until the bounds hold (the count bound counts visible rows)."""
        evicted = 0
        while True:
            count, size = self._totals(db)
            if count <= self.max_responses and size <= self.max_bytes:
                break
            row = db.execute(
                "SELECT id, dependants FROM responses WHERE hidden = 0 ORDER BY used LIMIT 1"
            ).fetchone()
            if row is None:
                break
            self._leave(db, row[0], row[1])
            evicted += 1
        if evicted:
            db.execute("UPDATE totals SET v = v + ? WHERE k = 'evictions'", (evicted,))

    @staticmethod
    def _totals(db: sqlite3.Connection) -> tuple[int, int]:
        values = dict(
            db.execute("SELECT k, v FROM totals WHERE k IN ('responses', 'bytes', 'hidden')").fetchall()
        )
        return int(values["responses"]) - int(values["hidden"]), int(values["bytes"])

    def _item_responses(self, ids: list[str]) -> dict[str, str]:
        db = self._connect()
        found: dict[str, str] = {}
        for start in range(0, len(ids), _IDS_PER_QUERY):
            chunk = ids[start : start + _IDS_PER_QUERY]
            marks = ", ".join("?" * len(chunk))
            found.update(db.execute(f"SELECT item_id, response FROM items WHERE item_id IN ({marks})", chunk))
        return found

    def _delete(self, response_id: str) -> bool:
        db = self._connect()
        with db:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute(
                "SELECT dependants FROM responses WHERE id = ? AND hidden = 0", (response_id,)
            ).fetchone()
            if row is None:
                return False
            self._leave(db, response_id, row[0])
            return True

    def _scope_bytes(self, scope: str) -> int:
        row = self._connect().execute("SELECT v FROM scope_bytes WHERE scope = ?", (scope,)).fetchone()
        return 0 if row is None else int(row[0])

    def _stats(self) -> StoreStats:
        values = dict(self._connect().execute("SELECT k, v FROM totals").fetchall())
        return StoreStats(
            responses=int(values["responses"]) - int(values["hidden"]),
            bytes=int(values["bytes"]),
            max_responses=self.max_responses,
            max_bytes=self.max_bytes,
            evictions=int(values["evictions"]),
            rejected=int(values["rejected"]),
        )

    def _create_conversation(self, c: StoredConversation, items: list[ConversationItem]) -> None:
        db = self._connect()
        with db:
            db.execute("BEGIN IMMEDIATE")
            db.execute(
                "INSERT INTO conversations (id, created_at, metadata, used, nbytes) VALUES (?, ?, ?, ?, ?)",
                (
                    c.id,
                    c.created_at,
                    c.metadata_json,
                    self._tick(db),
                    len(c.metadata_json) + _items_bytes(items),
                ),
            )
            db.executemany(
                "INSERT INTO conversation_items (conversation, item_id, data) VALUES (?, ?, ?)",
                [(c.id, i, d) for i, d in items],
            )
            self._evict_conversations(db, c.id)

    def _evict_conversations(self, db: sqlite3.Connection, keep: str) -> None:
        """Delete the least recently used conversations (never ``keep``) until the bounds hold."""
        evicted = 0
        while True:
            values = dict(
                db.execute(
                    "SELECT k, v FROM totals WHERE k IN ('conversations', 'conversation_bytes')"
                ).fetchall()
            )
            if (
                values["conversations"] <= self.max_responses
                and values["conversation_bytes"] <= self.max_bytes
            ):
                break
            row = db.execute(
                "SELECT id FROM conversations WHERE id != ? ORDER BY used LIMIT 1", (keep,)
            ).fetchone()
            if row is None:  # only ``keep`` is left: it stays, whatever its size
                break
            db.execute("DELETE FROM conversation_items WHERE conversation = ?", (row[0],))
            db.execute("DELETE FROM conversations WHERE id = ?", (row[0],))
            evicted += 1
        if evicted:
            db.execute("UPDATE totals SET v = v + ? WHERE k = 'evictions'", (evicted,))

    def _touch_conversation(self, db: sqlite3.Connection, conversation_id: str, grow: int = 0) -> bool:
        """Stamp a conversation used now (and ``grow`` its size); False if there is none."""
        return (
            db.execute(
                "UPDATE conversations SET used = ?, nbytes = nbytes + ? WHERE id = ?",
                (self._tick(db), grow, conversation_id),
            ).rowcount
            > 0
        )

    def _get_conversation(self, conversation_id: str) -> StoredConversation | None:
        db = self._connect()
        with db:
            db.execute("BEGIN IMMEDIATE")
            if not self._touch_conversation(db, conversation_id):
                return None
            return self._conversation_row(db, conversation_id)

    @staticmethod
    def _conversation_row(db: sqlite3.Connection, conversation_id: str) -> StoredConversation | None:
        row = db.execute(
            "SELECT id, created_at, metadata FROM conversations WHERE id = ?", (conversation_id,)
        ).fetchone()
        return StoredConversation(row[0], int(row[1]), bytes(row[2])) if row else None

    def _update_conversation(self, conversation_id: str, metadata_json: bytes) -> StoredConversation | None:
        db = self._connect()
        with db:
            db.execute("BEGIN IMMEDIATE")
            old = self._conversation_row(db, conversation_id)
            if old is None:
                return None
            self._touch_conversation(db, conversation_id, len(metadata_json) - len(old.metadata_json))
            db.execute("UPDATE conversations SET metadata = ? WHERE id = ?", (metadata_json, conversation_id))
            self._evict_conversations(db, conversation_id)
            return StoredConversation(conversation_id, old.created_at, metadata_json)

    def _delete_conversation(self, conversation_id: str) -> bool:
        db = self._connect()
        with db:
            db.execute("BEGIN IMMEDIATE")
            db.execute("DELETE FROM conversation_items WHERE conversation = ?", (conversation_id,))
            return db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,)).rowcount > 0

    def _conversation_items(self, conversation_id: str) -> list[ConversationItem] | None:
        db = self._connect()
        with db:
            db.execute("BEGIN IMMEDIATE")
            if not self._touch_conversation(db, conversation_id):
                return None
            rows = db.execute(
                "SELECT item_id, data FROM conversation_items WHERE conversation = ? ORDER BY seq",
                (conversation_id,),
            ).fetchall()
            return [(r[0], bytes(r[1])) for r in rows]

    def _conversation_head(self, conversation_id: str) -> ConversationHead | None:
        db = self._connect()
        with db:
            db.execute("BEGIN IMMEDIATE")
            if not self._touch_conversation(db, conversation_id):
                return None
            count, nbytes = db.execute(
                "SELECT item_count, item_bytes FROM conversations WHERE id = ?", (conversation_id,)
            ).fetchone()
            last = db.execute(
                "SELECT item_id FROM conversation_items WHERE conversation = ? ORDER BY seq DESC LIMIT 1",
                (conversation_id,),
            ).fetchone()
            return ConversationHead(int(count), last[0] if last else None, int(nbytes))

    def _conversation_holds(self, conversation_id: str, item_ids: list[str]) -> set[str] | None:
        db = self._connect()
        with db:
            db.execute("BEGIN")  # one snapshot: the conversation and the ids found in it
            if self._conversation_row(db, conversation_id) is None:
                return None
            held: set[str] = set()
            for start in range(0, len(item_ids), _IDS_PER_QUERY):
                chunk = item_ids[start : start + _IDS_PER_QUERY]
                marks = ", ".join("?" * len(chunk))
                rows = db.execute(
                    f"SELECT DISTINCT item_id FROM conversation_items WHERE conversation = ? AND item_id IN ({marks})",
                    (conversation_id, *chunk),
                )
                held.update(row[0] for row in rows)
            return held

    def _conversation_page(
        self, conversation_id: str, after: str | None, limit: int, order: str
    ) -> ConversationPage | None:
        db = self._connect()
        with db:
            db.execute("BEGIN IMMEDIATE")
            if not self._touch_conversation(db, conversation_id):
                return None
            compare, direction = (">", "ASC") if order == "asc" else ("<", "DESC")
            bound = ""
            args: tuple[object, ...] = (conversation_id,)
            if after is not None:
                row = db.execute(
                    "SELECT seq FROM conversation_items WHERE conversation = ? AND item_id = ?",
                    (conversation_id, after),
                ).fetchone()
                if row is None:
                    raise LookupError(after)
                bound = f" AND seq {compare} ?"
                args = (conversation_id, row[0])
            rows = db.execute(
                f"SELECT item_id, data FROM conversation_items WHERE conversation = ?{bound} "
                f"ORDER BY seq {direction} LIMIT ?",
                (*args, limit + 1),
            ).fetchall()
            return [(r[0], bytes(r[1])) for r in rows[:limit]], len(rows) > limit

    def _append_conversation_items(self, conversation_id: str, items: list[ConversationItem]) -> bool:
        db = self._connect()
        with db:
            db.execute("BEGIN IMMEDIATE")
            if not self._touch_conversation(db, conversation_id, _items_bytes(items)):
                return False
            db.executemany(
                "INSERT INTO conversation_items (conversation, item_id, data) VALUES (?, ?, ?)",
                [(conversation_id, i, d) for i, d in items],
            )
            self._evict_conversations(db, conversation_id)
            return True

    def _delete_conversation_item(self, conversation_id: str, item_id: str) -> bool | None:
        db = self._connect()
        with db:
            db.execute("BEGIN IMMEDIATE")
            if self._conversation_row(db, conversation_id) is None:
                return None
            freed = db.execute(  # one item, as in every backend: the first of an id given twice
                "DELETE FROM conversation_items WHERE seq = (SELECT seq FROM conversation_items"
                " WHERE conversation = ? AND item_id = ? ORDER BY seq LIMIT 1) "
                "RETURNING length(item_id) + length(data)",
                (conversation_id, item_id),
            ).fetchall()
            if not freed:
                return False
            self._touch_conversation(db, conversation_id, -sum(int(r[0]) for r in freed))
            return True

    def _close(self) -> None:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is not None:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            db.close()
            self._local.db = None

    # -- the event loop side -----------------------------------------------------------------

    async def _run(self, fn: Callable[..., T], *args: object) -> T:
        loop = asyncio.get_running_loop()
        try:
            return await asyncio.wait_for(loop.run_in_executor(self._thread, fn, *args), self.timeout)
        except (sqlite3.Error, OSError, asyncio.TimeoutError) as exc:
            logger.error("The SQLite store %s failed: %r", self.path, exc)
            raise ServiceUnavailableError("The response store is unavailable; retry later.") from exc

    async def get(self, response_id: str) -> StoredResponse | None:
        """The entry, marked most recently used; None if unknown or evicted."""
        return decode_stored_chain(await self._run(self._get, response_id), response_id)

    async def touch(self, response_id: str) -> bool:
        """Whether the entry is there, marked most recently used; its data is not read."""
        return bool(await self._run(self._touch, response_id))

    async def put(self, entry: StoredResponse) -> bool:
        """Keep an entry, evicting least recently used ones to stay within both bounds."""
        return await self._run(self._put, entry, own_part(entry), item_ids(entry))

    async def delete(self, response_id: str) -> bool:
        """Forget an entry (a trigger drops its items from the index)."""
        return await self._run(self._delete, response_id)

    async def item_responses(self, item_ids: Collection[str]) -> dict[str, str]:
        """The stored responses holding ``item_ids``: the index's primary key, no entry read."""
        return await self._run(self._item_responses, list(dict.fromkeys(item_ids)))

    async def scope_bytes(self, scope: str, limit: int | None = None) -> int:
        """The encoded bytes (rows' ``nbytes``, item index rows included) of the responses under ``scope``:
        exact, kept by triggers; one row read."""
        return await self._run(self._scope_bytes, scope)

    def counters(self) -> SQLiteCounters:
        """Counts of tenants' limits in this file's tables: every process on the file counts together."""
        return self._counters

    async def ping(self) -> None:
        """In this process: always reachable."""

    async def stats(self) -> StoreStats:
        """Counts, bytes and evictions (of every process sharing the file)."""
        return await self._run(self._stats)

    async def close(self) -> None:
        """Checkpoint the WAL into the database file and close it."""
        await asyncio.get_running_loop().run_in_executor(self._thread, self._close)
        self._thread.shutdown(wait=True)

    # -- conversations -------------------------------------------------------------------------

    async def create_conversation(
        self, conversation: StoredConversation, items: list[ConversationItem]
    ) -> None:
        """Keep a conversation and its first items (one transaction)."""
        await self._run(self._create_conversation, conversation, items)

    async def get_conversation(self, conversation_id: str) -> StoredConversation | None:
        """The conversation, or None."""
        return await self._run(self._get_conversation, conversation_id)

    async def update_conversation(
        self, conversation_id: str, metadata_json: bytes
    ) -> StoredConversation | None:
        """Replace its metadata."""
        return await self._run(self._update_conversation, conversation_id, metadata_json)

    async def delete_conversation(self, conversation_id: str) -> bool:
        """Forget a conversation and its items."""
        return await self._run(self._delete_conversation, conversation_id)

    async def conversation_items(self, conversation_id: str) -> list[ConversationItem] | None:
        """Its items, oldest first."""
        return await self._run(self._conversation_items, conversation_id)

    async def conversation_head(self, conversation_id: str) -> ConversationHead | None:
        """Its length and bytes (kept by triggers) and last id (the last row of its index)."""
        return await self._run(self._conversation_head, conversation_id)

    async def conversation_holds(self, conversation_id: str, item_ids: Collection[str]) -> set[str] | None:
        """The ids among ``item_ids`` found through the index on (conversation, item_id)."""
        return await self._run(self._conversation_holds, conversation_id, list(item_ids))

    async def conversation_page(
        self, conversation_id: str, *, after: str | None, limit: int, order: str
    ) -> ConversationPage | None:
        """One page (the index on (conversation, seq): only the page's rows are read)."""
        return await self._run(self._conversation_page, conversation_id, after, limit, order)

    async def append_conversation_items(self, conversation_id: str, items: list[ConversationItem]) -> bool:
        """Append items (one transaction)."""
        return await self._run(self._append_conversation_items, conversation_id, items)

    async def delete_conversation_item(self, conversation_id: str, item_id: str) -> bool | None:
        """Remove one item."""
        return await self._run(self._delete_conversation_item, conversation_id, item_id)

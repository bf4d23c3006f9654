"""The store: where every run, sample and environment is kept.

engine (opening a path or URL, the schema's upgrade), writes and queries (the two
halves of the Store), importing (big imports in short transactions), rows (what the
Store and the importer share), exactness (the sample rows queries return, and the one
decoder of whether a stored sample is exact); db puts the Store together and opens it;
reader reads an SQLite store for `perflab log` and `show` without SQLAlchemy, recording
writes a run into one for `perflab run`.
"""

# The names are perflab.store.db's, imported on first use: importing a module of the
# package (rows, exactness, reader) does not import SQLAlchemy (0.1 s of every command).
__all__ = ["MAX_RUN_ID", "Store", "default_url", "open_store", "process_start_time", "redact"]


def __getattr__(name: str):
    if name in __all__:
        from perflab.store import db

        return getattr(db, name)
    raise AttributeError(f"module 'perflab.store' has no attribute {name!r}")

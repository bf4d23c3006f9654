"""The store: where every run, sample and environment is kept.

engine (opening a path or URL, the schema's upgrade), writes and queries (the two
halves of the Store), importing (big imports in short transactions), rows (what the
Store and the importer share), exactness (the sample rows queries return, and the one
decoder of whether a stored sample is exact); db puts the Store together and opens it.
"""

from perflab.store.db import MAX_RUN_ID, Store, default_url, open_store, process_start_time, redact

__all__ = ["MAX_RUN_ID", "Store", "default_url", "open_store", "process_start_time", "redact"]

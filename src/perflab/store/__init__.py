"""The store: where every run, sample and environment is kept."""

from perflab.store.db import Store, default_url, open_store

__all__ = ["Store", "default_url", "open_store"]

"""The runbook wiki: markdown entries (source of truth) and their SQLite FTS5 index (a cache)."""

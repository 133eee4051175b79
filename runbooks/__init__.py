"""Built-in runbook entries (markdown files); shipped as package data."""

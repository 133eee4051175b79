"""The engine: facts, the check registry and runner, findings and the report model."""

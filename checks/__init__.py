"""Built-in checks, one module per concern; importable as llmdoctor.checks."""

"""Collectors: the only code that touches the outside world. See llmdoctor.engine.collect.Collector."""

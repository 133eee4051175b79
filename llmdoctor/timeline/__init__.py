"""The Prometheus history as a story: onsets of live findings, the Timeline view, charts."""

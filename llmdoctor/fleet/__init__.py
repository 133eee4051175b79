"""Running beside the fleet: the Prometheus exporter, alert rules, node textfile, MCP and kubectl."""

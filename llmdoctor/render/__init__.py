"""Reports as text: the terminal view, JSON and markdown, and text made safe to print."""

"""Any log against the runbooks: explain, signature matching, pasted-text repair, the retro loop."""

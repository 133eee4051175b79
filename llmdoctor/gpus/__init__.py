"""NVIDIA reference data: GPU catalog, driver and CUDA tables, Xid policy."""

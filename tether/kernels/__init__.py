"""Jupyter kernels as a library: launching one privately, its wire, the tool bridge, cells."""

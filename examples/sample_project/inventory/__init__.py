"""A tiny inventory: the example project tether's demo works on."""

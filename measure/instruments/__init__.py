"""The instruments: activation statistics, patching sweeps (and the naive hooks loops they are
checked against), and off-distribution scores of patched activations."""

"""Stdlib-only files that ship inside every study bundle.

`rankstats.py` is the one implementation of the rank statistics (average ranks, Spearman,
the attribution/patching join, component scores, AUC, seed bootstrap). `measure/`, the site
build and every bundle's `reproduce.py` all import it; the build copies it into each zip.
"""

"""The planted study: hand-built organisms whose answer key is fixed by construction (issue 20).

design.py (families, placements, background), circuits.py (each mechanism's members and what
they compute), weights.py (the weights, from the design), data.py (the pairs), organisms.py
(build and check), verify.py (the key check), study.py (the study through the common runner).
docs/measure.md has the design.
"""

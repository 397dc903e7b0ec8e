"""Routed organisms: small reward models whose key is made by training and hidden from the analysis.

Each rule's training gradients reach only a component set drawn at random per seed from a secret
salt (keys.py); the salt's sha256 is committed before any analysis runs and the salt itself only at
unblinding, so the analysis cannot read the key and anyone can check it afterwards (docs/routed.md).
"""

"""The trained planted-key organism: its generated pairs and its training."""

"""The MiniLM-L6 reward model: its pairs, its heads and gate, its study and bundle README."""

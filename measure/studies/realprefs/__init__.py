"""The realprefs study: a reward model trained here on real human preferences (issue 30)."""

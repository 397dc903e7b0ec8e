"""The hand-built planted organisms: their pairs, their construction and key, and their study."""

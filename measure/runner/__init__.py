"""The study runner: configuration, plan, shards, rows, summary, bundle writing, Ray, estimates."""

"""Schema revisions, oldest first by their `down_revision` chain; each one keeps every row it finds."""

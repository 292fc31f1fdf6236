"""Pure learning logic: no Dagster, no HTTP, no knowledge of where data lives."""

"""Dagster assets, one module per stage of the loop."""

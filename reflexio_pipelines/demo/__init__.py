"""The end-to-end demo: bundled sample conversations, published over HTTP and learned from by Dagster."""

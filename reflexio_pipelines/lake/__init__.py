"""Lake layout, table schemas and atomic IO. See lake/README.md for the layout on disk."""

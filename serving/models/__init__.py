"""Request and response shapes of the REST surface, one module per resource, compatible with the original Reflexio
API (its client, reflexio-client, parses every answer)."""

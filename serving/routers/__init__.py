"""HTTP routers, one per area of the API."""

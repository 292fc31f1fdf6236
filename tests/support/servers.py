from reflexio_pipelines.devtools.servers import serve_app  # noqa: F401  (moved there; tests import it from here)

from reflexio_pipelines.devtools.openai_stub import *  # noqa: F401,F403  (moved there; this path stays importable)

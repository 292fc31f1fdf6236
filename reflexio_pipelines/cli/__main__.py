"""`python -m reflexio_pipelines.cli`."""

from reflexio_pipelines.cli import main

main()

from reflexio_pipelines.cli.original import main

main()

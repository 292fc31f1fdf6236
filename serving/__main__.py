"""`python -m serving --host 127.0.0.1 --port 8081 [--lake PATH]` starts the service alone."""

from __future__ import annotations

import argparse
import logging
import os


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m serving")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--lake", help="lake root (default: $REFLEXIO_LAKE or ./lake)")
    parser.add_argument("--log-level", default="info")
    args = parser.parse_args()
    if args.lake:
        os.environ["REFLEXIO_LAKE"] = args.lake
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    import uvicorn

    from serving.app import create_app

    uvicorn.run(create_app(), host=args.host, port=args.port, log_level=args.log_level, access_log=False)


if __name__ == "__main__":
    main()

"""`python -m serving --host 127.0.0.1 --port 8081 [--lake PATH]` starts the service alone;
`python -m serving keys create --org ID | list | revoke KEY_ID` manages API keys (see serving/tenancy.py)."""

from __future__ import annotations

import argparse
import logging
import os
import sys


def keys(argv: list[str]) -> int:
    """Manage the API keys file named by REFLEXIO_API_KEYS_FILE (or --file)."""
    from serving.tenancy import KeyStore

    parser = argparse.ArgumentParser(prog="python -m serving keys")
    parser.add_argument("--file", default=os.environ.get("REFLEXIO_API_KEYS_FILE"))
    sub = parser.add_subparsers(dest="command", required=True)
    create = sub.add_parser("create", help="create a key for an organisation; prints it once")
    create.add_argument("--org", required=True)
    create.add_argument(
        "--limit",
        action="append",
        default=[],
        metavar="CLASS=PER_MINUTE",
        help="rate limit override, e.g. publish=600 (classes: publish, search, admin, other)",
    )
    sub.add_parser("list", help="list keys (ids, organisations, status; never the keys)")
    revoke = sub.add_parser("revoke", help="revoke a key by id")
    revoke.add_argument("key_id")
    args = parser.parse_args(argv)
    if not args.file:
        parser.error("set REFLEXIO_API_KEYS_FILE or pass --file")
    store = KeyStore(args.file)
    if args.command == "create":
        try:
            limits = {name: int(value) for name, value in (item.split("=", 1) for item in args.limit)}
            print(store.create(args.org, limits))
        except ValueError as exc:
            parser.error(str(exc))
    elif args.command == "list":
        for key in store.records():
            print(f"{key.key_id}\t{key.org_id}\t{'revoked' if key.revoked else 'active'}\t{key.rate_limits or ''}")
    elif not store.revoke(args.key_id):
        print(f"no key {args.key_id}", file=sys.stderr)
        return 1
    return 0


def main() -> None:
    if sys.argv[1:2] == ["keys"]:
        raise SystemExit(keys(sys.argv[2:]))
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

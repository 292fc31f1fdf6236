"""`python -m serving --host 127.0.0.1 --port 8081 [--lake PATH] [--no-daemon]` runs the whole loop: the service and,
as its child, the Dagster daemon whose sensors learn and index what is published (serving/daemon.py; `--no-daemon` or
REFLEXIO_DAEMON=off where the daemon runs elsewhere, as in deploy/);
`python -m serving keys create --org ID | list | revoke KEY_ID` manages API keys (see serving/tenancy.py)."""

from __future__ import annotations

import argparse
import logging
import os
import signal
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
    parser.add_argument(
        "--no-daemon",
        action="store_true",
        help="do not start the Dagster daemon (it runs elsewhere, e.g. its own container); also REFLEXIO_DAEMON=off",
    )
    args = parser.parse_args()
    if args.lake:
        os.environ["REFLEXIO_LAKE"] = args.lake
    logging.basicConfig(level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    import uvicorn

    from serving.app import create_app
    from serving.daemon import DaemonChild, daemon_wanted

    log = logging.getLogger("serving")
    daemon = DaemonChild() if daemon_wanted(args.no_daemon) else None
    if daemon is None:
        log.warning(
            "dagster daemon not started (--no-daemon or REFLEXIO_DAEMON=off): learning needs one running elsewhere"
        )
    else:
        try:
            daemon.start()
        except OSError:  # the API still serves; publishes wait in the landing files for a daemon
            log.exception("dagster daemon could not be started: published turns are not learned")
            daemon = None
    # uvicorn shuts down gracefully on SIGINT/SIGTERM, then restores the handlers it found and raises the signal
    # again before returning; with only the default handlers that would end this process before the daemon is
    # stopped. So the handlers it finds only note the signal, and it is raised again once the daemon is down.
    received: list[int] = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, _frame: received.append(signum))
    try:
        uvicorn.run(create_app(), host=args.host, port=args.port, log_level=args.log_level, access_log=False)
    finally:
        if daemon is not None:
            daemon.stop()
    for sig in dict.fromkeys(received):  # exit as the signal asked (status 128 + n), as uvicorn would have
        signal.signal(sig, signal.SIG_DFL)
        signal.raise_signal(sig)


if __name__ == "__main__":
    main()

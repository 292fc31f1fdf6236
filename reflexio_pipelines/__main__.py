"""`python -m reflexio_pipelines materialize|demo` — the operators' entry points."""

from __future__ import annotations

import argparse
import os
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reflexio_pipelines")
    sub = parser.add_subparsers(dest="command", required=True)
    mat = sub.add_parser("materialize", help="materialise every pending window, then rebuild and publish the index")
    mat.add_argument("--lake", help="lake root (default: $REFLEXIO_LAKE or ./lake)")
    mat.add_argument("--partition", action="append", help="a partition key to (re)materialise; repeatable")
    demo = sub.add_parser("demo", help="run the end-to-end demo (see README)")
    demo.add_argument("--lake", help="lake root (default: $REFLEXIO_LAKE or ./lake)")
    demo.add_argument("--once", action="store_true", help="exit after printing the result (default when CI=true)")
    demo.add_argument("--api-port", type=int, default=8081)
    demo.add_argument("--ui-port", type=int, default=3000)
    status = sub.add_parser("playbook-status", help="approve, reject or un-reject an agent playbook (via the API)")
    status.add_argument("agent_playbook_id", type=int)
    status.add_argument("playbook_status", choices=["approved", "rejected", "pending"])
    status.add_argument("--api", default=os.environ.get("REFLEXIO_URL", "http://127.0.0.1:8081"))
    agg = sub.add_parser("aggregate", help="cluster user playbooks into agent playbooks now (via the API)")
    agg.add_argument("--agent-version")
    agg.add_argument("--playbook-name")
    agg.add_argument("--api", default=os.environ.get("REFLEXIO_URL", "http://127.0.0.1:8081"))
    args = parser.parse_args(argv)
    if getattr(args, "lake", None):
        os.environ["REFLEXIO_LAKE"] = args.lake

    if args.command == "materialize":
        from reflexio_pipelines.runs import launch

        result = launch(args.partition)
        print(f"materialised {len(result.partition_keys)} window(s): {', '.join(result.partition_keys) or '-'}")
        print(f"runs: {', '.join(result.run_ids) or '-'}")
        print(f"index version: {result.index_version or '-'}")
        return 0 if result.success else 1

    if args.command in ("playbook-status", "aggregate"):
        return _call_api(args)

    from reflexio_pipelines.demo.run import run_demo

    once = args.once or os.environ.get("CI", "").lower() in {"1", "true", "yes"}
    return run_demo(api_port=args.api_port, ui_port=args.ui_port, once=once)


def _call_api(args: argparse.Namespace) -> int:
    """Control commands go through the service, so a decision applies to retrieval at once."""
    import httpx

    try:
        if args.command == "playbook-status":
            reply = httpx.put(f"{args.api}/api/update_agent_playbook_status", timeout=60,
                              json={"agent_playbook_id": args.agent_playbook_id, "playbook_status": args.playbook_status})  # fmt: skip
        else:
            body = {"agent_version": args.agent_version, "playbook_name": args.playbook_name}
            reply = httpx.post(f"{args.api}/api/run_playbook_aggregation", json=body, timeout=600)
    except httpx.HTTPError as exc:
        print(f"cannot reach the service at {args.api}: {exc}. Start it with `python -m serving`.", file=sys.stderr)
        return 2
    payload = reply.json()
    print(payload.get("msg") or payload.get("message") or payload)
    return 0 if reply.status_code == 200 and payload.get("success") else 1


if __name__ == "__main__":
    sys.exit(main())

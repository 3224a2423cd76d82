"""Manifest throughput against a local DynamoDB endpoint (moto_server on 127.0.0.1, its own process).

One client process, as one Spark task would run it: ids per second at several concurrencies, with and
without the cross-batch synthetic look-up (one Query per event id). Results are relative to moto, which is
much slower per request than DynamoDB but has no network round trip; issue 7's harness adds injected latency.

    .venv/bin/python -m bench.manifest_throughput --ids 4000 --concurrency 1 4 16
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
import time
import urllib.request
import uuid

from jobs.manifest import open_manifest


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ids", type=int, default=4000)
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    args = parser.parse_args()

    port = free_port()
    server = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), "moto_server"), "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    endpoint = f"http://127.0.0.1:{port}"
    os.environ.update(
        AWS_ENDPOINT_URL=endpoint, AWS_ACCESS_KEY_ID="x", AWS_SECRET_ACCESS_KEY="x", AWS_DEFAULT_REGION="eu-west-1"
    )
    try:
        for _ in range(100):
            try:
                urllib.request.urlopen(endpoint + "/moto-api/", timeout=1).close()
                break
            except OSError:
                time.sleep(0.1)
        results = []
        for detect in (False, True):
            for concurrency in args.concurrency:
                table = f"bench-{uuid.uuid4().hex[:8]}"
                manifest = open_manifest(f"dynamodb://{table}", concurrency=concurrency)
                manifest.create()
                client = manifest.client()
                ids = [(str(uuid.uuid4()), ["fp"]) for _ in range(args.ids)]
                started = time.perf_counter()
                for _ in client.check_ids(ids, 1_700_000_000, 1_700_000_000 + 86_400, detect):
                    pass
                seconds = time.perf_counter() - started
                results.append({
                    "cross_batch_synthetic": detect, "concurrency": concurrency, "ids": args.ids,
                    "requests": client.stats.requests, "seconds": round(seconds, 2),
                    "ids_per_second": round(args.ids / seconds), "requests_per_id": client.stats.requests / args.ids,
                })  # fmt: skip
                print(json.dumps(results[-1]), flush=True)
    finally:
        server.terminate()
        server.wait(timeout=10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

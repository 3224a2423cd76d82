"""`python -m jobs generate`: sample enriched events (no Spark)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "generate",
        help="generate sample enriched events",
        description="Generate realistic enriched events with a long-tail duplicate distribution (no Spark).",
    )
    parser.add_argument(
        "--output", required=True, metavar="OUT", help="a new or empty folder to write part-*.tsv files to"
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="OUT may hold an earlier generate's files: they are removed first (any other file stops the command)",
    )
    parser.add_argument("--events", required=True, type=int, metavar="N", help="number of lines to write")
    parser.add_argument(
        "--seed", type=int, default=1, metavar="S", help="random seed (default 1): same seed, same lines"
    )
    parser.add_argument("--batches", type=int, default=1, metavar="B",
                        help="spread events over B folders batch=1..B, copies landing in different batches (default 1)")  # fmt: skip
    parser.add_argument("--files", type=int, default=1, metavar="F", help="files per batch (default 1)")
    parser.add_argument("--gzip", action="store_true", help="write .tsv.gz files")
    parser.add_argument("--duplicate-share", type=float, default=0.01, metavar="X",
                        help="share of event ids that have more than one event (default 0.01)")  # fmt: skip
    parser.add_argument("--synthetic-share", type=float, default=0.4, metavar="X",
                        help="share of copies that are synthetic rather than natural (default 0.4)")  # fmt: skip
    parser.add_argument("--without-fingerprint-share", type=float, default=0.1, metavar="X",
                        help="share of events with an empty event_fingerprint (default 0.1)")  # fmt: skip
    parser.add_argument("--bad-share", type=float, default=0.001, metavar="X",
                        help="share of malformed lines (default 0.001)")  # fmt: skip
    parser.add_argument("--tail", choices=("long", "heavy"), default="long",
                        help="copies per shared id: long (default; most are pairs, large groups all synthetic) or "
                        "heavy (Pareto(1.2) up to 5,000, each copy synthetic by --synthetic-share)")  # fmt: skip
    parser.set_defaults(handler=handle)


def handle(args: argparse.Namespace) -> int:
    from jobs.tools.generate import GenerateOptions, generate, prepare_output

    options = GenerateOptions(
        events=args.events, seed=args.seed, batches=args.batches, files=args.files, gzip=args.gzip,
        duplicate_share=args.duplicate_share, synthetic_share=args.synthetic_share,
        without_fingerprint_share=args.without_fingerprint_share, bad_share=args.bad_share, tail=args.tail,
    )  # fmt: skip
    prepare_output(Path(args.output), args.overwrite)
    started = time.monotonic()
    stats = generate(Path(args.output), options)
    print(
        f"generated {stats['lines']:,} lines ({stats['event_ids']:,} event ids, {stats['natural_copies']:,} natural "
        f"and {stats['synthetic_copies']:,} synthetic copies, {stats['malformed']:,} malformed) in "
        f"{stats['batches']} batch(es) under {args.output} in {time.monotonic() - started:.1f} s"
    )
    return 0

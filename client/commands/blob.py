"""`deepresearch blob REF`: print (or save) what the blob store keeps under a
``sha256:`` reference: a crawled page, an agent's conversation, a cell of
code; audio and decks with `-o FILE`."""

from __future__ import annotations

import argparse
import sys

from client.errors import CliError
from client.options import connection
from infra.blobs import BlobNotFound, blob_store, digest_of


async def main(args: argparse.Namespace) -> int:
    try:
        digest_of(args.ref)
    except ValueError:
        raise CliError(f"not a blob reference: {args.ref!r} (they look like sha256:<64 hex digits>)") from None
    conn = connection(args)
    try:
        data = await blob_store(conn.data_dir).get_bytes(args.ref)
    except BlobNotFound as err:
        raise CliError(str(err)) from None
    if args.output:
        args.output.write_bytes(data)
        print(f"saved {len(data):,} bytes to {args.output}")
        return 0
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise CliError(f"{args.ref} holds {len(data):,} bytes of binary data: save it with -o FILE") from None
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
    return 0

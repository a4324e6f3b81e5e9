"""One module per `deepresearch` command, each with `async def main(args) -> int`;
`client/cli.py` imports only the one that runs."""

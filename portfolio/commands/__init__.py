"""CLI subcommands: each module has `register(subparsers)` and thin handlers over library functions."""

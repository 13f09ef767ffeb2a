"""One module per `llamadesk` subcommand (see app/cli.py)."""

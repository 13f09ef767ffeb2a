"""`llamadesk mcp`: being built (issue #35)."""

from __future__ import annotations

import argparse


def add_parser(sub) -> argparse.ArgumentParser:
    return sub.add_parser("mcp", help="(being built)")


def run(args: argparse.Namespace) -> int:
    raise NotImplementedError

"""`llamadesk docs`: being built (issue #36)."""

from __future__ import annotations

import argparse


def add_parser(sub) -> argparse.ArgumentParser:
    return sub.add_parser("docs", help="(being built)")


def run(args: argparse.Namespace) -> int:
    raise NotImplementedError

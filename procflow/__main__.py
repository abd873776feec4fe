"""``python -m procflow`` and the ``procflow`` console script (see ``procflow.studio.cli``)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``procflow`` command line and return its exit status.

    Args:
        argv: The arguments (default ``sys.argv[1:]``).
    """
    from procflow.studio.cli import main as cli_main

    return cli_main(argv)


if __name__ == "__main__":
    raise SystemExit(main())

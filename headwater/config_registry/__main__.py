"""`python -m headwater.config_registry --markdown`: print docs/configuration.md."""

from __future__ import annotations

import argparse

from .markdown import render


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m headwater.config_registry",
                                     description=__doc__)
    parser.add_argument("--markdown", action="store_true",
                        help="the configuration reference as Markdown")
    args = parser.parse_args(argv)
    if not args.markdown:
        parser.print_help()
        return 2
    print(render(), end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

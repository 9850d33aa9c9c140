"""``python -m tape <command>``: see tape/cli.py."""

from .cli import main

raise SystemExit(main())

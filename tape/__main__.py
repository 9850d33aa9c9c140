"""``python -m tape <command>``: see tape/cli.py."""

from .tools.cli import main

raise SystemExit(main())

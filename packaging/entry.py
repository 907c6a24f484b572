"""The frozen `clientmcp` executable's entry point: the installed command, unchanged."""

from clientmcp_fast.cli import main

raise SystemExit(main())

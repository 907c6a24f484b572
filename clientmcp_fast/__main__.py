"""`python -m clientmcp_fast` runs the `clientmcp` command."""

from clientmcp_fast.cli import main

raise SystemExit(main())

"""`python -m server.cli`: what the installed `sessiond` command runs."""

import sys

from server.cli.main import main

sys.exit(main())

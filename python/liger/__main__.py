"""`python -m liger`: the `liger` command (liger.cli)."""

import sys

from liger.cli import main

sys.exit(main())

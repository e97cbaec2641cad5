"""`python -m tierlab` runs the CLI."""
import sys

from tierlab.cli import main

sys.exit(main())

"""`python -m unicache.repl` runs the REPL (same as `unicache repl`)."""

import sys

from unicache.repl import main

sys.exit(main())

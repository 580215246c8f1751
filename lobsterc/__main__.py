"""`python -m lobsterc`: the `lobsterc` command."""

import sys

if __name__ == "__main__":  # run, not imported (a walk over the package imports it too)
    from lobsterc.tools.cli import main

    sys.exit(main())

"""`python -m vm`: the `lobster` command (the installed compiler is found by its entry point,
as for an embedding process)."""

import sys

if __name__ == "__main__":  # run, not imported (a walk over the package imports it too)
    from vm.cli.main import leave, main, one_process

    one_process(sys.argv[1:])
    sys.exit(leave(main()))

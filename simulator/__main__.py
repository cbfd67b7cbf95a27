"""`python -m simulator` is the same as the `endurance` command.

Ctrl-C while the command's modules are still being imported (the first second or
two) ends in one line and exit code 130, as it does once the command runs."""

import sys

if __name__ == "__main__":
    try:
        from simulator.cli import main
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        sys.exit(130)
    main()

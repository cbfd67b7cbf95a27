"""`python -m simulator` is the same as the `endurance` command."""

from simulator.cli import main

if __name__ == "__main__":
    main()

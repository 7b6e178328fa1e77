"""``python -m tether``: the same as the ``tether`` command."""

from tether.cli import main

if __name__ == "__main__":
    main()

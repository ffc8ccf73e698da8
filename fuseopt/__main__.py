"""`python -m fuseopt`: the `fuse-opt` command (see `fuseopt.cli`)."""

from fuseopt.cli import console_main

if __name__ == "__main__":
    console_main()

"""``python -m workload`` is the same as the ``workload`` console script."""

from workload.cli import main

if __name__ == "__main__":
    main()

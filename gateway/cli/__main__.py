"""``python -m gateway.cli``, for a checkout without the console script."""

from gateway.cli import main

main()

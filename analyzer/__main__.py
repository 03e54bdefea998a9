"""`python -m analyzer` is the `loganalyze` command."""

from analyzer.cli import main

main()

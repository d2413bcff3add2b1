"""The `sessiond` command line, its commands and the headless client.

Invariant: a subcommand imports its module only when it runs.
"""

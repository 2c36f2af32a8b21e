"""The `gpubench` command line: one module per subcommand and what they share."""

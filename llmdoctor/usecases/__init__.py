"""What a command does, without the command line: gather facts for a target, run the checks."""

"""The engine: the CLI, the runner and answer channel, the sandbox, kernel runs, notebooks."""

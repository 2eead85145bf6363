"""Stage adapters: one module per stage kind."""

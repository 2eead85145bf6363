"""The console script's commands (``run``, ``compare``, ``cache``) and the validation they
run first. ``wai_exp.cli`` dispatches to them; nothing here imports ``cli``."""

#: The directory the command was typed in, recorded by the CLI before Hydra runs.
START_DIR_ENV = "WAI_EXP_START_DIR"

"""``python -m gridsample_lower``: the command line, as ``gridsample-lower``."""

from gridsample_lower.cli.main import run

run()

"""The ``gridsample-lower`` command line, installed as ``gridsample_lower.cli``."""

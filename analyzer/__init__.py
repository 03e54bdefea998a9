"""loganalyze: crash forensics for SGLang deployments."""

__version__ = "0.1.0"

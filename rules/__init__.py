"""Shipped rules: one TOML file per rule, loaded by analyzer.rulebook."""

"""Benchmarks: scripts run by hand that measure a stage or the whole decision. They sit above the whole
house: a benchmark may import any package, and no package imports a benchmark (the import-linter layers in
pyproject.toml)."""

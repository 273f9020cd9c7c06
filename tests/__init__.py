"""The test suite; its folders mirror the product's rooms (README.md, "Tests, CI, benchmarks")."""

"""The command line (dgemma_lsp/cli.py): headless complete / fix, and parity with the server."""

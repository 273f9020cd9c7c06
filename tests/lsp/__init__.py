"""The language server (lsp/): server end to end, completion, context, prompt, next edits, post-processing."""

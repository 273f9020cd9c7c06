"""Structure repair (lsp/repair/): rules, the model path, the validation gate, every path a fix reaches a client by."""

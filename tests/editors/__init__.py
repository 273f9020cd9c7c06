"""The editor clients (editors/): Neovim and VS Code driven for real, with their tools and Lua tests here."""

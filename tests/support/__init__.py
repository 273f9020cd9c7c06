"""Helpers shared by the tests: the LSP client, the test-only launcher, real HTTP servers, kernel-test plumbing."""

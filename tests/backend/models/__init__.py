"""The shipped small model (backend/models/small/): how it loads and what it has learned."""

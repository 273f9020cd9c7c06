"""The small model's training (backend/train/): its data and its training step."""

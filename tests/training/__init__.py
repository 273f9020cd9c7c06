"""The small model's training (training/): its data and its training step."""

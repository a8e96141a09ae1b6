"""Cross-validated model selection that shares work across folds and settings."""

"""Data files bundled with gpuksvm (the ijcnn1 demo set)."""

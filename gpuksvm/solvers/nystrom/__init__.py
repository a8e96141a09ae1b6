"""Nyström kernel maps (LLSVM, LLSVM2) and the k-means that picks their landmarks (SPEC §1)."""

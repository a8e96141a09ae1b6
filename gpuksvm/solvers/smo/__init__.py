"""Exact C-SVC dual solvers (hinge loss): LIBSVM, our two-variable SMO on the host, and the
batched working-set SMO on CPU and GPU."""

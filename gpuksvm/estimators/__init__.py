"""The estimators: validation, then one call into the solver layer, then the fitted model.

The public classes are exported by :mod:`gpuksvm` (``gpuksvm.LLSVM``, ...)."""

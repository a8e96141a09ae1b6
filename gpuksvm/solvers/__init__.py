"""Solver functions shared by the estimators (no estimators live here).

* :mod:`gpuksvm.solvers.linear` — linear SVM: primal Newton, dual coordinate
  descent, selective block minimization;
* :mod:`gpuksvm.solvers.smo` — kernel SVM dual by SMO, batched;
* :mod:`gpuksvm.solvers.meb` — minimum enclosing ball on the simplex (CVM).
"""

"""Solver functions shared by the estimators (no estimators live here).

* :mod:`gpuksvm.solvers.linear` — linear SVM: primal Newton, dual coordinate
  descent, selective block minimization;
* :mod:`gpuksvm.solvers.smo` — kernel SVM dual by SMO, batched;
* :mod:`gpuksvm.solvers.meb` — minimum enclosing ball on the simplex (CVM);
* :mod:`gpuksvm.solvers.svi` — support vector identification (SVI): the
  algorithm, with its steps as pure functions in :mod:`gpuksvm.solvers.svi_steps`.
"""

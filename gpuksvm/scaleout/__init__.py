"""Distributed training and prediction on Dask (beyond one machine) — one module per method.

The estimators accept a ``dask.array`` (NumPy- or CuPy-backed chunks) and
train without ever gathering the data on one worker.  Each method is split
into what must see all rows — done chunk-wise on the workers, only small
summaries travel — and the small problem that stays on the driver:

LLSVM (:mod:`gpuksvm.scaleout.llsvm`, SPEC §1)
    landmarks Z from a sample (the same rows, k-means and random state as the
    single-process fit), M = U Λ^{-1/2} on the driver; Z and M are broadcast
    once; F = K(X, Z) M is computed per chunk on the workers (and kept there,
    ``persist``); the single-process primal Newton solver
    (:func:`gpuksvm.solvers.linear.newton.newton_solve`, same stopping rule and
    exact line search) runs over a map-reduce oracle: every pass returns only
    the k×k F_Iᵀ F_I, the k-vector gradient terms and the loss per binary
    problem (summed in a tree on the workers), each line-search step two
    numbers per problem; the driver does the Cholesky solve.
SVI (:mod:`gpuksvm.scaleout.svi`, SPEC §3)
    the M sub-SVMs are trained on different workers in parallel (each gets
    only its θn rows); the averaged decision values and the margin selection
    are computed chunk-wise (each chunk returns only its best margin
    candidates); the s×s closed-form solve runs as one task on one worker.
CVM (:mod:`gpuksvm.scaleout.cvm`, SPEC §2)
    every chunk returns its furthest points and squared violations (exact scan); with sampling,
    only the sampled rows are fetched; the core-set QP stays on the driver.
Prediction (:mod:`gpuksvm.scaleout.predict`: ``predict``, ``decision_function``, ``transform``, …)
    maps the fitted estimator's own method over the row chunks and returns a
    dask array (lazy; nothing is computed until the caller asks).

Works with or without ``distributed``: pass ``client=`` (a
``distributed.Client``), or the default scheduler is used (the active client
if one exists).  ``dask_cuda`` is optional: with one worker per GPU
(``dask_cuda.LocalCUDACluster``) and CuPy-backed chunks, every map function
runs on the chunk's device through :mod:`gpuksvm.array.backend` namespaces.

Worker loss: Dask re-runs the tasks of a lost worker and recomputes lost
chunks from their lineage, so a fit survives a worker restart with the same
result; every reduction also counts the rows it summed and the fit stops with
:class:`~gpuksvm.scaleout.runtime.DistributedFitError` if a pass did not see every row
exactly once, so a model is never computed from partial data.

The estimators route a Dask ``X`` here through their fit context
(:func:`gpuksvm.estimators.base.fit_context`, which validates the parameters
and keeps the previous model if the fit raises) and their prediction methods
through :func:`~gpuksvm.scaleout.dispatch.dask_dispatch`; called directly,
``fit_llsvm``, ``fit_cvm`` and ``fit_svi`` call the estimator's ``fit`` with their Dask
row source, so they enter the same fit context.  The modules of this
package import the solver layer and never an estimator module.  This package replaces
``gpuksvm.distributed`` (kept one release as a deprecated alias).
"""
from __future__ import annotations

from gpuksvm.scaleout.cvm import fit_cvm
from gpuksvm.scaleout.dispatch import dask_dispatch
from gpuksvm.scaleout.llsvm import fit_llsvm
from gpuksvm.scaleout.predict import map_method
from gpuksvm.scaleout.runtime import DistributedFitError, is_dask_collection
from gpuksvm.scaleout.svi import fit_svi

__all__ = ["DistributedFitError", "dask_dispatch", "fit_cvm", "fit_llsvm", "fit_svi", "is_dask_collection",
           "map_method"]

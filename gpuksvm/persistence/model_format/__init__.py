"""The closed schema of gpuksvm model files: which classes a file may hold and what each holds.

A model file (:mod:`gpuksvm.persistence.io`) stores one estimator as a JSON tree plus named
arrays.  This package is the *only* place that turns such a tree into Python
objects, and it is closed in the way safetensors and skops.io's trusted types
are:

* **Classes come from one explicit registry** (:data:`REGISTRY`): the gpuksvm
  estimators, the state records they nest (OK-FEB's ``OnlineSubspace`` and
  online learners ``Pegasos``, ``RegularizedLMS``), and the two scikit-learn classes a gpuksvm model is
  really wrapped in (``Pipeline`` and ``StandardScaler``).  A file names a
  registry key; the class is the object stored under that key (saving checks
  ``type(obj) is cls`` — no subclasses, no module import, no attribute walk).
* **Each class declares its fitted attributes** (:class:`Entry` ``fitted``):
  name → :class:`Spec` (array kind, dtype kind, shape, the nested estimator
  class it must be, …).  Loading sets only declared attributes; an undeclared
  name, a value of another shape or type, a nested estimator of another class
  is a :class:`ModelFormatError`.  Dimensions are named (``"n_sv"``,
  ``"n_features_in_"``, an integer parameter such as ``"rank"``) and must agree
  across attributes, so a model that loads predicts without shape errors.
* **Each attribute declares its values**, checked on the arrays read: a float
  array is finite with magnitude at most :func:`~.specs.value_bound` unless
  declared ``finite=False`` (a fit summary), stored rows are within the
  working range of their dtype, integers have ranges, labels are distinct and
  a classifier has two at least; each array member backs one attribute.  The
  class's consistency checks (:mod:`~gpuksvm.persistence.model_format.consistency`) relate
  attributes: counts that add up, one Platt pair per binary problem,
  kernel-specific attributes, kernel values on the stored rows, positive
  definite matrices, widths along a ``Pipeline``.  So a model that loads
  predicts finite values on finite input of the range it was fitted on.
* **Constructor parameters** are JSON values (plus a few closed kinds: a
  :class:`~gpuksvm.kernels.kernel.Kernel`, a NumPy float dtype, a NumPy
  ``RandomState``, an array of user landmarks, the steps of a ``Pipeline``) and
  go through the estimator's own parameter checks (``_check_params``,
  scikit-learn's ``_validate_params``) before the model is returned.
* **Values** are a closed set of node kinds (below); there is no generic
  "object" node, and nothing is ever unpickled.

Node kinds of the JSON tree (format version 2)
----------------------------------------------
=======================  ===================================================
JSON ``null/true/1/1.5/"s"``  ``None``, bool, int (int64 range), float, str
``{"float": "nan"}``      a non-finite float (``"nan"``, ``"inf"``, ``"-inf"``)
``[...]``                 list
``{"tuple": [...]}``      tuple
``{"dict": {...}}``       dict with string keys
``{"items": [[k, v]]}``   dict with int/float/str/bool keys (``class_weight``)
``{"array": "a3"}``       the array stored as member ``a3.npy`` (one node per member)
``{"strings": [...]}``    a 1-D object array of str (labels, feature names)
``{"sparse": "csr", ...}``  a SciPy CSR/CSC/COO matrix from its arrays
``{"kernel": {...}}``     a :class:`~gpuksvm.kernels.kernel.Kernel` (validated)
``{"dtype": "float32"}``  ``numpy.dtype('float32')`` or ``'float64'``
``{"device": "cpu"}``     the CPU device (models always load on the host)
``{"random_state": ...}`` a ``numpy.random.RandomState`` (MT19937 state)
``{"estimator": name, "params": {...}, "fitted": {...}}``  a registry class
=======================  ===================================================

The same code reads a tree for :func:`gpuksvm.persistence.io.load` (with the arrays) and for
``gpuksvm info`` (with :class:`ArrayInfo` stand-ins from the header's table):
both validate everything above.

Modules
-------
:mod:`~gpuksvm.persistence.model_format.specs`
    the error, the limits, :class:`ArrayInfo` stand-ins and the :class:`Spec` kinds
    that check one attribute (array kind and shape, named dimensions, …)
:mod:`~gpuksvm.persistence.model_format.consistency`
    the checks across a model's attributes (counts, kernels, positive definite
    matrices, Pipeline widths)
:mod:`~gpuksvm.persistence.model_format.registry`
    :class:`Entry` and :data:`REGISTRY`: every class a file may hold, its declared
    attributes and its consistency checks
:mod:`~gpuksvm.persistence.model_format.encode`
    Python objects → JSON tree + arrays (:func:`encode_model`)
:mod:`~gpuksvm.persistence.model_format.decode`
    JSON tree + arrays → validated objects (:func:`decode_model`)
:mod:`~gpuksvm.persistence.model_format.v1`
    format version 1 trees rewritten as version 2 (:func:`translate_v1`)
:mod:`~gpuksvm.persistence.model_format.describe`
    one-line descriptions of decoded values (:func:`describe_value`)
"""
from __future__ import annotations

from gpuksvm.persistence.model_format.decode import decode_model
from gpuksvm.persistence.model_format.describe import describe_value
from gpuksvm.persistence.model_format.encode import encode_model
from gpuksvm.persistence.model_format.registry import REGISTRY, Entry, entry_for
from gpuksvm.persistence.model_format.specs import ARRAY_DTYPE_RE, MAX_DEPTH, ArrayInfo, ModelFormatError
from gpuksvm.persistence.model_format.v1 import translate_v1

__all__ = ["ModelFormatError", "ArrayInfo", "REGISTRY", "Entry", "entry_for", "encode_model", "decode_model",
           "translate_v1", "describe_value", "MAX_DEPTH", "ARRAY_DTYPE_RE"]

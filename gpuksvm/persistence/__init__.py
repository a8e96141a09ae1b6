"""Model files: the closed ``.npz`` format (:mod:`~gpuksvm.persistence.model_format`), its zip
container (:mod:`~gpuksvm.persistence.archive`) and :func:`gpuksvm.save` / :func:`gpuksvm.load`
(:mod:`~gpuksvm.persistence.io`)."""

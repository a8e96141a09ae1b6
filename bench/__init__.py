"""gpuksvm's benchmarks: a registry of cases run by one command line.

    python -m bench --list
    python -m bench llsvm_ijcnn1 --scale small --device cpu
    python -m bench --all --scale small --report

Cases are registered in :mod:`bench.cases` (:mod:`bench.harness` holds the
registry, the timing helper and the record schema); ``bench/report.py``
draws the figures of one run from ``bench/results/records.jsonl``.
"""

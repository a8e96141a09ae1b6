"""bench/: the case registry, ``python -m bench``'s command line, the record schema and the report."""
from __future__ import annotations

import dataclasses
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench import __main__ as cli  # noqa: E402
from bench import report  # noqa: E402
from bench import tune  # noqa: E402
from bench.harness import (FIELDS, REGISTRY, SCALES, Case, Record, measure, quiet_note,  # noqa: E402
                           read_records, register, write_records)

EXPECTED_FIELDS = ("case", "method", "dataset", "scale", "device", "params", "fit_s", "predict_s", "accuracy",
                   "objective", "n_train", "n_test", "fit_times_s", "extra", "timestamp", "host", "run_id")


def test_list_shows_every_registered_case():
    listing = cli.list_cases().splitlines()
    assert [line.split()[0] for line in listing] == list(REGISTRY)
    for name, case in REGISTRY.items():
        assert case.description and set(case.scales) <= set(SCALES)
        if case.kind != "script":
            assert "tiny" in case.scales, f"{name} has no tiny scale for a smoke run"


def test_every_study_is_a_case():
    studies = {p.stem for p in (ROOT / "bench" / "studies").glob("*.py") if not p.stem.startswith("_")}
    assert studies and studies <= set(REGISTRY)
    assert all(REGISTRY[s].kind == "study" for s in studies)


def test_command_line_parses_and_rejects(capsys):
    args = cli.build_parser().parse_args(["llsvm_ijcnn1", "--scale", "tiny", "--device", "cpu"])
    assert (args.names, args.scale, args.device) == (["llsvm_ijcnn1"], "tiny", "cpu")
    assert cli.main(["--list"]) == 0
    assert "cvm_checkerboard" in capsys.readouterr().out
    for bad in (["no_such_case"], [], ["cvm_checkerboard", "--scale", "huge"], ["cvm_checkerboard", "--device", "tpu"]):
        with pytest.raises(SystemExit) as exc:
            cli.main(bad)
        assert exc.value.code == 2


def test_register_refuses_doubles_and_unknown_scales():
    case = REGISTRY["cvm_checkerboard"]
    with pytest.raises(ValueError, match="twice"):
        register(case)
    with pytest.raises(ValueError, match="unknown scales"):
        register(Case("x_never_registered", case.run, {"huge": {}}, "x"))


def test_measure_times_every_repeat_and_returns_the_result():
    calls = []
    t = measure(lambda: calls.append(1) or len(calls), repeats=3, warmup=2)
    assert len(calls) == 5 and t.result == 5 and len(t.times_s) == 3
    assert min(t.times_s) <= t.median_s <= max(t.times_s)
    with pytest.raises(ValueError):
        measure(lambda: None, repeats=0)
    assert quiet_note([0.1, 0, 0], [0.2, 0, 0]).startswith("quiet") or quiet_note([0.1], [0.2])


def test_schema_fields_are_fixed():
    assert FIELDS == EXPECTED_FIELDS
    with pytest.raises(ValueError, match="unknown fields"):
        Record.from_dict({"case": "c", "method": "m", "dataset": "d", "scale": "tiny", "device": "cpu",
                          "train_time": 1.0})


def test_cvm_case_runs_at_tiny_scale(tmp_path):
    out = tmp_path / "records.jsonl"
    assert cli.main(["cvm_checkerboard", "--scale", "tiny", "--device", "cpu", "--out", str(out)]) == 0
    recs = read_records(out)
    assert {r.method for r in recs} == {"CVM", "CVM C=1000", "SVC (sklearn)"}
    assert len({r.run_id for r in recs}) == 1
    for r in recs:
        line = json.loads(r.to_json())
        assert tuple(line) == EXPECTED_FIELDS
        assert r.case == "cvm_checkerboard" and r.scale == "tiny" and r.device == "cpu"
        assert 0.9 < r.accuracy <= 1.0 and r.fit_s > 0 and r.n_train == 2000 and r.n_test == 2000
        assert "quiet" in r.host and "cpu_count" in r.host
    cvm = next(r for r in recs if r.method == "CVM")
    assert cvm.objective == cvm.extra["duality_gap"] and cvm.params["gamma"] == 60.0


def _rec(run_id: str, method: str, t: float, acc: float, **kw) -> Record:
    base = dict(case="llsvm_ijcnn1", method=method, dataset="ijcnn1", scale="small", device="cpu",
                params={"k": kw.pop("k", 100)}, fit_s=t, accuracy=acc, n_train=1000, n_test=500,
                fit_times_s=[t], timestamp="2026-01-01T00:00:00+00:00", host={"cpu_count": 2}, run_id=run_id)
    return Record(**{**base, **kw})


def test_report_reads_the_schema_and_plots_one_run(tmp_path):
    old = [_rec("run-old", "LLSVM", 9.0, 0.5), _rec("run-old", "OLD ONLY", 9.0, 0.5)]
    new = [_rec("run-new", "LLSVM", 0.1 * k, 0.9 + k / 1e4, k=k) for k in (100, 200, 400)]
    new += [_rec("run-new", "SVC (sklearn)", 5.0, 0.98, params={}),
            _rec("run-new", "LinearSVM", 0.05, 0.92, case="methods_ijcnn1", params={}),
            _rec("run-new", "SVI", 1.0, 0.97, case="svi_subset_rows", params={"rows_per_sub_svm": 100, "seed": 0}),
            _rec("run-new", "SVI", 2.0, 0.98, case="svi_subset_rows", params={"rows_per_sub_svm": 200, "seed": 0}),
            _rec("run-new", "SVC (sklearn)", 3.0, 0.985, case="svi_subset_rows", params={})]
    path = write_records(old + new, tmp_path / "records.jsonl")
    assert [dataclasses.asdict(r) for r in read_records(path)] == [dataclasses.asdict(r) for r in old + new]
    run = report.select_run(read_records(path))            # the latest run, not the older one
    assert {r.run_id for r in run} == {"run-new"}
    assert report.select_run(read_records(path), "run-old") == old
    assert report.main(["--records", str(path), "--out-dir", str(tmp_path)]) == 0
    text = (tmp_path / "REPORT.md").read_text()
    assert "run `run-new`" in text and "OLD ONLY" not in text
    figs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert figs == ["all_ijcnn1_acc_vs_time.png", "llsvm_ijcnn1_ijcnn1_acc_vs_time.png",
                    "methods_ijcnn1_ijcnn1_acc_vs_time.png", "svi_subset_rows_ijcnn1_acc_vs_rows_per_sub_svm.png"]
    for f in figs:
        assert f"({f})" in text and (tmp_path / f).stat().st_size > 1000
    assert re.search(r"\| LLSVM \| ijcnn1 \| k=100 \| 1000 \| 500 \| 10 \|  \| 0\.91 \|", text)


def test_figure_has_one_legend_entry_per_method_and_no_point_labels(tmp_path, monkeypatch):
    import matplotlib.pyplot as plt

    recs = [_rec("r", "LLSVM", 0.1 * k, 0.9 + k / 1e4, k=k) for k in (100, 200, 400)]
    recs += [_rec("r", m, 1.0 + i, 0.95) for i, m in enumerate(["SVC (sklearn)", "A", "B"])]
    saved = {}
    monkeypatch.setattr(plt, "close", lambda fig=None: saved.setdefault("fig", fig))
    report.plot_acc_vs_time(recs, tmp_path / "f.png", "t")
    ax = saved["fig"].axes[0]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["LLSVM", "SVC (sklearn)", "A", "B"]
    assert len({line.get_marker() for line in ax.get_lines()}) == 4
    assert len(ax.texts) == 0                               # no text over the points


def test_run_script_captures_output_failures_and_restores_the_path(tmp_path):
    from bench.harness import run_script

    ok = tmp_path / "fine.py"
    ok.write_text("import sys\ndef main(argv):\n    sys.path.insert(0, '/nowhere')\n    print('ran', argv)\n    return 0\n")
    bad = tmp_path / "broken.py"
    bad.write_text("def main(argv):\n    raise RuntimeError('boom')\n")
    before = list(sys.path)
    r = run_script(ok, ["--scale", "tiny"], echo=False)
    assert (r["name"], r["status"], r["stdout"].strip()) == ("fine", "ok", "ran ['--scale', 'tiny']")
    assert sys.path == before
    r = run_script(bad, [], echo=False)
    assert r["status"] == "FAILED" and "boom" in r["traceback"]
    assert report.run_benchmark.__doc__ and callable(report.run_benchmark)   # what bench/gpu_suite.py imports


def test_rows_sweep_gets_a_time_vs_n_figure(tmp_path):
    recs = [_rec("r", "CVM", 0.1 * i, 0.99, case="cvm_checkerboard", dataset="checkerboard", params={"n": n})
            for i, n in enumerate((1000, 10_000, 100_000), 1)]
    recs.append(_rec("r", "SVC (sklearn)", 2.0, 0.99, case="cvm_checkerboard", dataset="checkerboard",
                     params={"n": 1000}))
    figs = report.make_figures(recs, tmp_path)
    assert sorted(p.name for p in figs["cvm_checkerboard"]) == [
        "cvm_checkerboard_checkerboard_acc_vs_time.png", "cvm_checkerboard_checkerboard_time_vs_n.png"]


@pytest.mark.parametrize("name", ["solvers_kernel", "solvers_linear", "solvers_batched"])
def test_engine_cases_run_at_tiny_scale(name, tmp_path):
    out = tmp_path / "records.jsonl"
    assert cli.main([name, "--scale", "tiny", "--device", "cpu", "--out", str(out)]) == 0
    recs = read_records(out)
    ref, cands = recs[0], recs[1:]
    assert cands and "(sklearn)" in ref.method
    assert all(r.case == name and r.n_train == 300 and r.fit_s > 0 for r in recs)
    if name == "solvers_batched":     # 2 problems of 150 rows; the libsvm engine matches sequential SVC
        assert [r.params["solver"] for r in recs] == ["libsvm", "libsvm"]
        assert cands[0].extra["converged"] and cands[0].extra["n_sv"] == ref.extra["n_sv"]
        return
    assert ref.objective is not None and 0.8 < ref.accuracy <= 1.0
    for r in cands:      # every engine solves the reference's problem: same objective, same accuracy
        assert r.extra["rel_obj_gap"] < 1e-6 and abs(r.objective - ref.objective) <= 1e-6 * abs(ref.objective)
        assert r.accuracy == pytest.approx(ref.accuracy, abs=2 / 300)
    solvers = {r.params["solver"] for r in cands}
    assert solvers == ({"libsvm", "smo", "working_set-cpu"} if name == "solvers_kernel"
                       else {"newton", "liblinear-primal"})


def test_solvers_script_runs_the_engine_cases(tmp_path, monkeypatch):
    """``bench/solvers.py`` (what bench/gpu_suite.py runs) is the three native cases and their JSON."""
    from bench.harness import run_script

    monkeypatch.setenv("GPUKSVM_BENCH_RESULTS", str(tmp_path))
    r = run_script(ROOT / "bench" / "solvers.py", ["--scale", "tiny", "--device", "cpu"], echo=False)
    assert r["status"] == "ok", r["traceback"]
    payload = json.loads((tmp_path / "solvers.json").read_text())
    assert {rec["case"] for rec in payload["records"]} == {"solvers_kernel", "solvers_linear", "solvers_batched"}
    assert len(payload["records"]) == len((tmp_path / "solvers.jsonl").read_text().splitlines())
    assert '"tiny"' in (ROOT / "bench" / "solvers.py").read_text()   # bench/gpu_suite.py's scale probe


def test_svi_case_runs_at_tiny_scale(tmp_path):
    out = tmp_path / "records.jsonl"
    assert cli.main(["svi_vs_svc", "--scale", "tiny", "--device", "cpu", "--out", str(out)]) == 0
    svc, svi = read_records(out)
    assert (svc.method, svi.method) == ("SVC (sklearn)", "SVI")
    assert svc.dataset == svi.dataset == "two_sines" and svc.n_train == 500 and svc.n_test == 10_000
    assert svc.params == svi.params == {"gamma": 1.0, "C": 10.0}
    assert "predict_same_path_s" in svc.extra and svc.extra["predict_same_path_agreement"] > 0.99
    assert svi.extra["n_problems"] == 1 and svi.extra["fit_speedup_vs_SVC"] > 0
    assert svi.extra["accuracy_gap_pp"] == pytest.approx(100 * (svc.accuracy - svi.accuracy))
    assert 0.85 < svi.accuracy <= 1.0 and abs(svi.accuracy - svc.accuracy) < 0.02


def test_kernels_case_runs_at_tiny_scale(tmp_path):
    out = tmp_path / "records.jsonl"
    assert cli.main(["kernels_rbf", "--scale", "tiny", "--device", "cpu", "--out", str(out)]) == 0
    recs = read_records(out)
    assert [(r.method, r.params["n"], r.params["k"], r.params["d"]) for r in recs] == [
        ("numpy-blas", 200, 70, 22), ("numpy-blas", 70, 30, 100)]
    for r in recs:
        e, p = r.extra, r.params
        assert len(e["block_times_s"]) == 3 and e["block_s"] > 0 and e["bandwidth_GBps"] > 0
        assert e["TFLOP/s"] == pytest.approx(2.0 * p["n"] * p["k"] * p["d"] / e["block_s"] / 1e12)
        assert e["x_write_floor"] == pytest.approx(e["block_s"] * e["bandwidth_GBps"] * 1e9 / (p["n"] * p["k"] * 4))


def test_okfeb_approx_case_runs_at_tiny_scale(tmp_path):
    out = tmp_path / "records.jsonl"
    assert cli.main(["okfeb_approx", "--scale", "tiny", "--device", "cpu", "--out", str(out)]) == 0
    recs = read_records(out)
    assert {r.dataset for r in recs} == {"two_spheres", "tracking"} and len(recs) == 16
    for stream in ("two_spheres", "tracking"):
        err = {r.method: r.extra["kernel_error"] for r in recs if r.dataset == stream}
        assert all(0.0 <= e < 1.0 for e in err.values())
        # a rank-k/2 Nyström map is never better than the full rank-k one on the same landmarks
        assert err["Nyström k-means rank k/2"] >= err["Nyström k-means"]
        full = [r for r in recs if r.dataset == stream and r.method.startswith("OK-FEB r=k ")]
        assert {r.extra["le_nystrom_random"] for r in full} == {
            min(err["OK-FEB r=k β=1"], err["OK-FEB r=k β=0.5"]) <= err["Nyström random"]}
    assert all("final_error" in r.extra for r in recs if r.method.endswith("β=1"))


def test_report_table_shows_the_cases_extra_columns():
    recs = [_rec("r", "numpy-blas", None, None, case="kernels_rbf", params={"n": 200},
                 extra={"block_s": 0.25, "TFLOP/s": 1.5, "ignored": 7})]
    text = report.md_table(recs, REGISTRY["kernels_rbf"].columns)
    head, _, row = text.splitlines()
    assert head.endswith("| block_s | TFLOP/s | x_write_floor | speedup_vs_first | bandwidth_GBps |")
    assert row.endswith("| 0.25 | 1.5 |  |  |  |") and "7" not in row.split("|")[-6:]


def test_llsvm_order_case_is_registered():     # about 10 s at tiny scale: registration only
    case = REGISTRY["llsvm_order"]
    assert case.kind == "benchmark" and set(case.scales) == set(SCALES)
    assert case.scales["small"]["ks"] == [500, 1000] and case.scales["small"]["first_rows"] == 20_000
    assert case.scales["small"]["n_train"] is None and case.scales["small"]["baselines"]


def test_llsvm2_grid_case_is_registered():     # about 7 s at tiny scale: registration only
    case = REGISTRY["llsvm2_grid"]
    assert case.kind == "benchmark" and set(case.scales) == set(SCALES)
    small = case.scales["small"]
    assert (small["n_train"], small["n_val"], small["k"]) == (8000, 4000, 300)
    assert len(small["gammas"]) * len(small["Cs"]) == 16 and small["lambda_exponents"] == [-5, -3, -1, 1, 3, 5]


def test_converted_sections_left_the_scripts():
    """A section that is a native case is not also a section of its script."""
    import ast

    for script, gone in (("llsvm", {"order", "grid"}), ("okfeb", {"approx"})):
        tree = ast.parse((ROOT / "bench" / f"{script}.py").read_text())
        sections = next(ast.literal_eval(n.value) for n in tree.body if isinstance(n, ast.Assign)
                        and getattr(n.targets[0], "id", "") == "SECTIONS")
        assert sections and not gone & set(sections)


def test_tune_case_runs_at_tiny_scale(tmp_path):
    out = tmp_path / "records.jsonl"
    assert cli.main(["tune", "--scale", "tiny", "--device", "cpu", "--out", str(out)]) == 0
    ours, same, svc, *torchkm = read_records(out)
    assert (ours.method, same.method, svc.method) == ("GridSearchCV (gpuksvm)", "GridSearchCV (sklearn) same estimator",
                                                      "GridSearchCV(SVC, n_jobs=-1) (sklearn)")
    # TorchKM's search only where the optional torchkm package is installed
    assert [r.method for r in torchkm] == (["TorchKM (cvksvm, CPU)"] if tune._torchkm_available() else [])
    assert all(r.case == "tune" and r.n_train == 600 and r.fit_s > 0 and 0.85 < r.accuracy <= 1.0
               for r in (ours, same, svc))
    assert ours.extra["max_abs_d_mean_test_score"] <= 0.002 and ours.extra["same_best_params"]
    assert ours.extra["best_params"] == same.extra["best_params"] and ours.extra["candidates"] == 4
    assert ours.extra["shared_work"] and not any("NOT CONVERGED" in w for w in ours.extra["shared_work"])
    assert "shared_work" not in svc.extra


def test_tune_runs_a_paper_case_at_a_chosen_size(tmp_path, capsys):
    out = tmp_path / "records.jsonl"
    assert tune.main(["llsvm_ijcnn1", "--n-train", "600", "--n-test", "400", "--out", str(out)]) == 0
    ours, same = read_records(out)
    assert (ours.method, same.method) == ("GridSearchCV (gpuksvm)", "GridSearchCV (sklearn) same estimator")
    assert ours.n_train == 600 and ours.n_test == 400 and ours.extra["candidates"] == 6
    assert ours.extra["max_abs_d_mean_test_score"] <= 0.002 and ours.extra["same_best_params"]

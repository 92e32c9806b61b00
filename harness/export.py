"""``rlvr export``: a run directory as a dataset (Hugging Face ``datasets`` on disk, parquet or
jsonl), one row per sample, with the run's summary and fingerprint in the dataset card.

The card is ``README.md`` in the Hugging Face format (YAML metadata, then the run's scores, the
protocol and the verifier versions); ``summary.json`` and ``config.yaml`` travel beside it, and
for the ``hf`` format the card is also the dataset's ``info.description``, so
``datasets.load_from_disk(DIR).info.description`` names the run it came from. Everything loads
offline: ``datasets.load_from_disk(DIR)`` (hf), ``datasets.load_dataset("parquet",
data_files=DIR + "/samples.parquet")``, ``load_dataset("json", data_files=DIR + "/samples.jsonl")``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from rlvr.harness.errors import UserError
from rlvr.harness.paths import inside, replace_dir
from rlvr.harness.report_format import benchmark_label, markdown_table, percent_ci
from rlvr.harness.results import CONFIG, SUMMARY, load_samples, read_summary

FORMATS = ("hf", "parquet", "jsonl")


def dataset_card(summary: dict[str, Any], fmt: str, rows: int) -> str:
    protocol = summary.get("protocol", {})
    sampling = protocol.get("sampling", {})
    grading = protocol.get("grading", {})
    data_files = {"parquet": "samples.parquet", "jsonl": "samples.jsonl"}.get(fmt)
    header = [
        "---",
        "tags: [rlvr, evaluation, verifiable-rewards]",
        f"pretty_name: rlvr run {summary.get('run', '')}".rstrip(),
    ]
    if data_files:
        header += ["configs:", "- config_name: default", "  data_files:", "  - split: test", f"    path: {data_files}"]
    header.append("---")
    rows_table = markdown_table(
        ["benchmark", "problems", "samples", "mean@n % [95% CI]", "fingerprint"],
        [
            [
                benchmark_label(name, b, summary),
                b["n_problems"],
                b["n_samples"],
                percent_ci(b["mean_at_n"]),
                b.get("fingerprint", "-"),
            ]
            for name, b in summary.get("benchmarks", {}).items()
        ],
    )
    model = summary.get("model", {})
    lines = [
        *header,
        f"# Samples of the rlvr evaluation run `{summary.get('run', '')}`",
        "",
        f"{rows} samples (one row per sample: prompt, completion, extracted answer, verdict, reason, seed) of "
        f"model `{model.get('name')}` (weights hash `{model.get('weights_hash')}`), graded by "
        f"{grading.get('math_verifier')} / {grading.get('code_verifier')}.",
        "",
        f"Run fingerprint `{summary.get('fingerprint')}`, protocol fingerprint "
        f"`{summary.get('protocol_fingerprint')}`: "
        f"template `{protocol.get('template', {}).get('name')}`, n={sampling.get('n')}, "
        f"temperature={sampling.get('temperature')}, "
        f"top_p={sampling.get('top_p')}, max_tokens={sampling.get('max_tokens')}, seed={sampling.get('seed')}, "
        f"backend {protocol.get('backend', {}).get('backend')} {protocol.get('backend', {}).get('dtype')}.",
        "",
        rows_table,
        "",
        "`summary.json` (every metric, versions, hardware, timings) and `config.yaml` (the resolved settings) are "
        "beside this card.",
    ]
    return "\n".join(lines) + "\n"


def export_run(run_dir: str | Path, fmt: str, out: str | Path, overwrite: bool = False) -> Path:
    """Write the samples of ``run_dir`` as ``fmt`` under ``out``. ``out`` must be new or empty
    unless ``overwrite``; either way it is built in a temporary sibling and renamed into place, so
    a failed export changes nothing, and it may never hold (or be) the run it exports."""
    run_dir, out = Path(run_dir), Path(out)
    if fmt not in FORMATS:
        raise UserError(f"--format must be one of {', '.join(FORMATS)}")
    if not run_dir.is_dir():
        raise UserError(f"{run_dir} is not a run directory; pass the --out of an `rlvr eval` run")
    if inside(run_dir, out):
        raise UserError(f"--out {out} is the run or holds it; choose a directory outside {run_dir}")
    if inside(out, run_dir):
        raise UserError(f"--out {out} is inside the run {run_dir}; choose a directory outside it")
    summary = read_summary(run_dir)
    if summary is None:
        raise UserError(f"{run_dir} has no summary.json; finish (or resume) that `rlvr eval` first")
    frame = load_samples(run_dir)
    if frame.empty:
        raise UserError(f"{run_dir} has no samples.jsonl (summaries alone hold no samples to export)")
    card = dataset_card(summary, fmt, len(frame))
    with replace_dir(out, overwrite) as tmp:
        if fmt == "hf":
            import datasets

            dataset = datasets.Dataset.from_pandas(frame, preserve_index=False)
            dataset.info.description = card
            dataset.save_to_disk(str(tmp))
        elif fmt == "parquet":
            frame.to_parquet(tmp / "samples.parquet", index=False)
        else:
            with (tmp / "samples.jsonl").open("w", encoding="utf-8") as fh:
                for record in frame.to_dict(orient="records"):
                    fh.write(json.dumps(record, ensure_ascii=False, default=str) + "\n")
        (tmp / "README.md").write_text(card, encoding="utf-8")
        shutil.copyfile(run_dir / SUMMARY, tmp / SUMMARY)
        if (run_dir / CONFIG).exists():
            shutil.copyfile(run_dir / CONFIG, tmp / CONFIG)
    return out

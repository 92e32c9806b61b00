"""One importable package, ``rlvr``: the rooms stay at the top of the repository and the wheel
maps them into ``rlvr.sandbox``, ``rlvr.harness`` and ``rlvr.trainers``, so installing rlvr puts
no generic name (``harness``, ``sandbox``, ``trainers``) into site-packages."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
ROOMS = ("sandbox", "harness", "trainers")


def package_folders() -> dict[str, str]:
    """``rlvr.<dotted>`` -> folder for every folder of the package that holds Python modules."""
    found = {}
    for room in ("rlvr", *ROOMS):
        for folder in sorted({p.parent for p in (ROOT / room).rglob("*.py")}):
            parts = folder.relative_to(ROOT).parts
            if "__pycache__" not in parts:
                found[".".join(parts if parts[0] == "rlvr" else ("rlvr", *parts))] = str(Path(*parts))
    return found


def test_the_wheel_lists_every_folder_of_modules_and_maps_the_rooms():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    assert setuptools["package-dir"] == {"rlvr": "rlvr", **{f"rlvr.{room}": room for room in ROOMS}}
    folders = package_folders()
    assert sorted(setuptools["packages"]) == sorted(folders), "pyproject's packages differ from the folders"
    missing = [folder for folder in folders.values() if not (ROOT / folder / "__init__.py").is_file()]
    assert not missing, f"folders of modules without __init__.py (the wheel would drop them): {missing}"


def test_the_entry_points_name_the_package():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    targets = [*project["scripts"].values(), *project.get("entry-points", {}).get("rlvr.commands", {}).values()]
    assert targets and all(target.startswith("rlvr.") for target in targets), targets


CHECK = r"""
import harness, leaderboards, rlvr, rlvr.harness, subprocess, sys
assert harness.WHO == "someone else" and leaderboards.WHO == "someone else", "the other packages were shadowed"
site = rlvr.__file__.rsplit("/rlvr/", 1)[0]
assert site.endswith("site-packages") and rlvr.harness.__file__.startswith(site), (rlvr.__file__, rlvr.harness.__file__)
from rlvr.sandbox import verify_code, verify_math
assert verify_math(r"\boxed{\frac{1}{2}}", "0.5").correct
verdict = verify_code("print(int(input()) * 2)", [{"input": "21", "output": "42"}])
assert verdict.correct, verdict
help_text = subprocess.run([sys.argv[1], "train", "--help"], capture_output=True, text=True, check=True).stdout
assert "drgrpo" in help_text and "corp" in help_text, help_text
plan = subprocess.run([sys.argv[1], "train", "drgrpo", "--config", "paper", "--plan"], capture_output=True, text=True)
assert plan.returncode == 0 and "Qwen2.5-Math-7B" in plan.stdout, plan.stdout + plan.stderr
listing = subprocess.run([sys.argv[1], "benchmarks"], capture_output=True, text=True, check=True).stdout
assert "math500" in listing.lower(), listing
print("ok")
"""


@pytest.mark.slow
def test_the_built_wheel_installs_and_imports_beside_a_package_named_harness(tmp_path):
    """Build the wheel, install it into a fresh environment that already has packages named
    ``harness`` and ``leaderboards``, and use it from outside the checkout: both stay importable,
    the verifiers (the code judge starts from the installed package) and the command line work."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONSAFEPATH")}  # nothing of the checkout
    wheels = tmp_path / "wheels"
    build = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", str(wheels)]
    subprocess.run([*build, str(ROOT)], check=True, cwd=tmp_path, env=env, timeout=300)
    (wheel,) = wheels.glob("rlvr-*.whl")
    top = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in top if not t.endswith(".dist-info")} == {"rlvr"}, top

    env_dir = tmp_path / "fresh"
    base = getattr(sys, "_base_executable", sys.executable)
    subprocess.run([base, "-m", "venv", "--without-pip", str(env_dir)], check=True, env=env, timeout=120)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
        ).strip()
    )
    for other in ("harness", "leaderboards"):  # someone else's packages with our rooms' generic names
        (site / other).mkdir()
        (site / other / "__init__.py").write_text('WHO = "someone else"\n', encoding="utf-8")
    # the dependencies come from this environment's site-packages, after the fresh one's own
    ours = [p for p in sys.path if p.endswith("site-packages")] or [sysconfig.get_path("purelib")]
    (site / "zz_dependencies.pth").write_text("".join(f"{p}\n" for p in ours), encoding="utf-8")
    install = [sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps", str(wheel)]
    subprocess.run(install, check=True, cwd=tmp_path, env=env, timeout=300)
    run = subprocess.run(
        [python, "-c", CHECK, str(env_dir / "bin" / "rlvr")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), run.stdout + run.stderr

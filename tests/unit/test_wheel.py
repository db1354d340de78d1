"""The built wheel carries the built-in scripts, and an installed copy finds them there."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BUILT_INS = ["coding-session", "personal-assistant", "personal-assistant-light", "smoke"]


def test_wheel_ships_and_finds_the_built_in_scripts(tmp_path):
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(REPO),
        ],
        check=True,
        capture_output=True,
        timeout=120,
    )
    (wheel,) = (tmp_path / "dist").glob("agentsession-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for name in BUILT_INS:
            packaged = f"agentsession_core/script/builtin/{name}.yaml"
            assert packaged in names
            assert archive.read(packaged) == (REPO / "scripts" / f"{name}.yaml").read_bytes()
        # Presets and prefect.yaml travel too, so `--preset demo` and `serve` work from a wheel.
        for preset in ("demo", "nightly"):
            assert f"agentsession_core/campaign/presets/{preset}.yaml" in names
        assert "flows/prefect.yaml" in names
        archive.extractall(tmp_path / "site")

    # Import the unpacked wheel ahead of the editable checkout, from a directory that has no
    # scripts/ of its own, so only the packaged copies can be found.
    probe = (
        "import json; from agentsession_core import script as s; "
        "print(json.dumps([s.__file__, str(s.builtin_dir()), s.builtin_names(), "
        "len(s.load_script('coding-session').steps)]));"
        "from agentsession_core.campaign import preset_files as c; "
        "print(c.PRESET_DIR, c.preset_names())"
    )
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "site")}
    result = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    first, presets = result.stdout.splitlines()
    assert presets.startswith(str(tmp_path / "site" / "agentsession_core" / "campaign" / "presets"))
    assert "'demo'" in presets and "'nightly'" in presets
    module, directory, names, steps = json.loads(first)
    assert module.startswith(str(tmp_path / "site"))
    assert directory == str(tmp_path / "site" / "agentsession_core" / "script" / "builtin")
    assert names == BUILT_INS
    assert steps == 20

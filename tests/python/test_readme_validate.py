"""README.md's `gt validate` sample is what gt validate prints (issue 40,
item 6: the sample's list of known keys lacked `limits` and `security`). The
README's bad.yaml is validated here and the output compared line for line;
only the plugin directory, which depends on the build, is the README's."""

import os
import pathlib
import re
import subprocess

import pytest

REPO = pathlib.Path(__file__).resolve().parents[2]
BIN = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))


def readme_sample():
    text = (REPO / "README.md").read_text()
    m = re.search(r"For this `bad\.yaml`:\n\n```yaml\n(.*?)```\n\n```\n\$ gt validate bad\.yaml\n(.*?)```", text, re.S)
    assert m, "README.md has no gt validate sample"
    return m.group(1), m.group(2).splitlines()


def test_readme_validate_sample_is_what_gt_validate_prints(tmp_path):
    if not (BIN / "gt").exists():
        pytest.skip(f"gt not built in {BIN}")
    manifest, want = readme_sample()
    (tmp_path / "bad.yaml").write_text(manifest)
    r = subprocess.run([str(BIN / "gt"), "validate", "bad.yaml"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=60, env={**os.environ, "GT_PLUGIN_PATH": ""})
    assert r.returncode == 1
    got = r.stdout.splitlines()
    where = re.compile(r"\(no gt_instruction_logg\.so in [^)]*\)")
    readme_dirs = where.search("\n".join(want)).group(0)
    assert [where.sub(readme_dirs, line) for line in got] == want
    known = re.search(r"known: ([^)]*)\)", got[1]).group(1).split(", ")
    assert {"limits", "security"} <= set(known)

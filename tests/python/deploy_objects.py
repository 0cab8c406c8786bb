"""What the deployment tests (test_deploy*.py) share: the paths of the
files under deploy/, the Kubernetes objects loaded from deploy/kubernetes/*.yaml
(fixture `k8s`), offline schema validation through tests/deploy/validate.cjs
(fixture `npm_modules`), and small readers of a workload's container.
"""

import json
import os
import pathlib
import shutil
import subprocess

import pytest


REPO = pathlib.Path(__file__).resolve().parents[2]
DEPLOY_README = REPO / "deploy" / "README.md"
K8S_FILES = [REPO / "deploy" / "kubernetes" / "gt.yaml", REPO / "deploy" / "kubernetes" / "servicemonitor.yaml"]
SBATCH = REPO / "deploy" / "slurm" / "gt.sbatch"
VALIDATE = REPO / "tests" / "deploy" / "validate.cjs"
BIN_DIR = pathlib.Path(os.environ.get("GT_BIN_DIR", REPO / "build" / "bin"))


# ---- loading the Kubernetes objects ---------------------------------------------------


@pytest.fixture(scope="module")
def npm_modules():
    """The directory scripts/setup-npm.sh installed the validation packages
    into (running it, which is a no-op when they are there already)."""
    if not (shutil.which("node") and shutil.which("npm")):
        pytest.skip("node/npm not installed: the Kubernetes schema validation needs them (scripts/setup-npm.sh)")
    modules = pathlib.Path(os.environ.get("GT_NPM_DIR", REPO / "build" / "npm"))
    setup = subprocess.run(["bash", str(REPO / "scripts" / "setup-npm.sh")], cwd=REPO, capture_output=True,
                           text=True, timeout=300, env={**os.environ, "GT_NPM_DIR": str(modules)})
    assert setup.returncode == 0, f"scripts/setup-npm.sh failed:\n{setup.stdout}\n{setup.stderr}"
    return modules


def validate(npm_modules, *files):
    """Runs tests/deploy/validate.cjs; returns (exit status, its JSON summary)."""
    out = subprocess.run(["node", str(VALIDATE), "--modules", str(npm_modules)] + [str(f) for f in files],
                         capture_output=True, text=True, timeout=60)
    assert out.returncode in (0, 1), f"validate.cjs could not run (status {out.returncode}):\n{out.stderr}"
    return out.returncode, json.loads(out.stdout)


def load_documents(path):
    """Every non-empty YAML document of `path`: PyYAML when this interpreter
    has it (Debian's python3-yaml, which python3-torch pulls in), else the
    npm `yaml` package through node."""
    try:
        import yaml
    except ImportError:
        yaml = None
    if yaml is not None:
        with open(path) as f:
            return [d for d in yaml.safe_load_all(f) if d is not None]
    if not shutil.which("node"):
        pytest.skip("neither PyYAML nor node to parse the Kubernetes YAML")
    modules = pathlib.Path(os.environ.get("GT_NPM_DIR", REPO / "build" / "npm"))
    script = ("const r=require('module').createRequire(process.argv[1]+'/package.json');"
              "const Y=r('yaml');const fs=require('fs');"
              "console.log(JSON.stringify(Y.parseAllDocuments(fs.readFileSync(process.argv[2],'utf8'))"
              ".map(d=>d.toJS()).filter(d=>d!=null)))")
    out = subprocess.run(["node", "-e", script, str(modules), str(path)], capture_output=True, text=True, timeout=60)
    if out.returncode != 0:
        pytest.skip(f"no PyYAML, and node could not parse YAML (run scripts/setup-npm.sh): {out.stderr}")
    return json.loads(out.stdout)


@pytest.fixture(scope="module")
def k8s():
    """{(kind, name): object} over deploy/kubernetes/*.yaml."""
    objects = {}
    for path in K8S_FILES:
        for obj in load_documents(path):
            key = (obj["kind"], obj["metadata"]["name"])
            assert key not in objects, f"{key} defined twice"
            objects[key] = obj
    return objects


def container(workload):
    containers = workload["spec"]["template"]["spec"]["containers"]
    assert len(containers) == 1, "one gt container per pod"
    return containers[0]


def flag(c, name):
    """The value after `name` in a container's args (flags are separate words)."""
    args = c["args"]
    assert args.count(name) == 1, f"{c['name']}: {name} given {args.count(name)} times in {args}"
    return args[args.index(name) + 1]


def port_number(c, port):
    """A probe's or Service's target port (a name or a number) as the container's number."""
    if isinstance(port, int):
        return port
    matches = [p["containerPort"] for p in c["ports"] if p.get("name") == port]
    assert len(matches) == 1, f"{c['name']} has no container port named {port!r}"
    return matches[0]


def is_subset(small, big):
    return all(big.get(k) == v for k, v in small.items())


def manifests(k8s, tmp_path):
    """The ConfigMap's gt manifests, {key: file written under tmp_path}."""
    data = k8s[("ConfigMap", "gt-manifests")]["data"]
    files = {}
    for key, text in data.items():
        files[key] = tmp_path / key
        files[key].write_text(text)
    return files

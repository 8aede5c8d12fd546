"""The packages' metadata installs what they import: each declares the siblings it imports, at a
range that holds the siblings' current versions; the pins of constraints.txt fall in the ranges
the packages declare; the facade's ``quantization`` extra is bitsandbytes. (``.ci/install_check``
installs the built wheels into a venv holding only torch and runs the README there.)"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = sorted((ROOT / "packages").glob("*/pyproject.toml"))
FIRST_PARTY = {"thunder", "thunder_interp", "thunder_ir", "thunder_transforms", "thunder_executors"}


def _project(pyproject: Path) -> dict:
    return tomllib.loads(pyproject.read_text())["project"]


def _version(pyproject: Path) -> str:
    config = tomllib.loads(pyproject.read_text())
    about = pyproject.parent / config["tool"]["hatch"]["version"]["path"]
    found = re.search(r'__version__ = "([^"]+)"', about.read_text())
    assert found, about
    return found.group(1)


def _import_name(pyproject: Path) -> str:
    return _project(pyproject)["name"].replace("-", "_")


VERSIONS = {canonicalize_name(_project(p)["name"]): _version(p) for p in PACKAGES}


def _pins() -> dict[str, str]:
    pins = {}
    for line in (ROOT / "constraints.txt").read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        req = Requirement(line)
        if req.marker is None or req.marker.evaluate():
            (spec,) = req.specifier
            pins[canonicalize_name(req.name)] = spec.version
    return pins


def test_the_five_packages_are_there() -> None:
    assert set(VERSIONS) == {
        "thunder",
        "thunder-interp",
        "thunder-ir",
        "thunder-transforms",
        "thunder-executors",
    }


@pytest.mark.parametrize("pyproject", PACKAGES, ids=lambda p: p.parent.name)
def test_each_package_declares_the_siblings_it_imports(pyproject: Path) -> None:
    own = _import_name(pyproject)
    imported = set()
    for source in (pyproject.parent / "src").rglob("*.py"):
        imported |= set(re.findall(r"^\s*(?:from|import) (thunder\w*)", source.read_text(), re.M))
    imported = (imported & FIRST_PARTY) - {own}
    declared = {
        canonicalize_name(r.name): r
        for r in map(Requirement, _project(pyproject).get("dependencies", []))
    }
    siblings = {canonicalize_name(n) for n in imported}
    assert sorted(siblings - set(declared)) == [], f"{own} imports siblings it does not declare"
    for name, req in declared.items():
        if name in VERSIONS:
            assert req.specifier.contains(VERSIONS[name]), (
                f"{own} requires {req}, but {name} is {VERSIONS[name]}"
            )
            assert str(req.specifier) and "<" in str(req.specifier), f"{req}: give an upper bound"


@pytest.mark.parametrize("pyproject", PACKAGES, ids=lambda p: p.parent.name)
def test_the_dev_pins_satisfy_the_declared_ranges(pyproject: Path) -> None:
    pins = _pins()
    project = _project(pyproject)
    reqs = [Requirement(r) for r in project.get("dependencies", [])]
    for extra in project.get("optional-dependencies", {}).values():
        reqs += [Requirement(r) for r in extra]
    for req in reqs:
        pinned = pins.get(canonicalize_name(req.name))
        if pinned is not None:
            assert req.specifier.contains(pinned, prereleases=True), f"{req} vs pin {pinned}"


def test_the_quantization_extra_is_bitsandbytes() -> None:
    facade = _project(ROOT / "packages" / "thunder" / "pyproject.toml")
    extra = [Requirement(r) for r in facade["optional-dependencies"]["quantization"]]
    assert [canonicalize_name(r.name) for r in extra] == ["bitsandbytes"]


def test_the_readme_install_is_the_one_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    check = (ROOT / ".ci" / "install_check").read_text()
    line = 'pip install --find-links dist "$(echo dist/thunder-*.whl)[quantization]"'
    assert line in readme
    assert '--find-links dist "$(echo dist/thunder-*.whl)[quantization]"' in check
    assert "./dev wheels" in readme and "./dev wheels" in check
    assert ".ci/install_check" in (ROOT / ".ci" / "run").read_text()

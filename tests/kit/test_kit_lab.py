"""``./kit lab`` serves the kit's root with the kit's JupyterLab overrides, and the README's notebook paths exist.

The browser test (``tests/browser``) drives a server started the same way; these checks need no browser.
"""

from __future__ import annotations

import fnmatch
import json
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OVERRIDES = ROOT / ".jupyter" / "lab-settings" / "overrides.json"
SERVER_CONFIG = ROOT / ".jupyter" / "jupyter_server_config.json"
NOTIFICATION = "@jupyterlab/apputils-extension:notification"


def _lab_command() -> str:
    kit = (ROOT / "kit").read_text()
    m = re.search(r"^\s*lab\)(.*?);;", kit, re.S | re.M)
    assert m, "./kit has no lab) command"
    return m.group(1)


def test_kit_lab_serves_the_root_with_the_kit_settings_overrides():
    cmd = _lab_command()
    assert '--ServerApp.root_dir="$PWD"' in cmd, cmd
    assert '--LabApp.app_settings_dir="$PWD/.jupyter/lab-settings"' in cmd, cmd
    assert not re.search(r"jupyter\" lab (notebooks|exercises|solutions)\b", cmd), f"roots at a subfolder: {cmd}"


def test_kit_lab_opens_on_the_first_lesson_and_lists_each_lesson_once():
    assert '--config="$PWD/.jupyter/jupyter_server_config.json"' in _lab_command()
    config = json.loads(SERVER_CONFIG.read_text())
    url = config["LabApp"]["default_url"]
    first = url.removeprefix("/lab/tree/")
    assert url.startswith("/lab/tree/") and (ROOT / first).is_file(), url
    readme = (ROOT / "README.md").read_text()
    assert first in readme.split("The full course", 1)[0], f"{first} is not on the README's path"
    globs = config["ContentsManager"]["hide_globs"]
    shown = [p for p in [*ROOT.glob("notebooks/*"), *ROOT.glob("solutions/*"), *ROOT.glob("exercises/*")]
             if not p.name.startswith(".") and not any(fnmatch.fnmatch(p.name, g) for g in globs)]  # dot: hidden
    stems = [p.parent.name + "/" + p.stem for p in shown]
    assert len(stems) == len(set(stems)), f"listed twice: {sorted(s for s in stems if stems.count(s) > 1)}"
    assert all(p.suffix == ".ipynb" for p in shown), sorted(p.name for p in shown if p.suffix != ".ipynb")
    for default in ("__pycache__", "*.pyc", ".DS_Store"):  # JupyterLab's own defaults stay hidden
        assert default in globs


def test_overrides_turn_the_news_prompt_and_update_check_off():
    overrides = json.loads(OVERRIDES.read_text())
    assert overrides[NOTIFICATION] == {"fetchNews": "false", "checkForUpdates": False}


def test_overrides_name_settings_the_installed_jupyterlab_knows():
    schemas = Path(sys.prefix) / "share" / "jupyter" / "lab" / "schemas"
    if not schemas.is_dir():
        pytest.skip(f"no JupyterLab schemas under {schemas}")
    for plugin, values in json.loads(OVERRIDES.read_text()).items():
        package, name = plugin.split(":")
        schema = json.loads((schemas / package / f"{name}.json").read_text())
        for key, value in values.items():
            prop = schema["properties"].get(key)
            assert prop is not None, f"{plugin}: no setting {key!r} in JupyterLab's schema"
            if "oneOf" in prop:
                assert value in [o["const"] for o in prop["oneOf"]], (plugin, key, value)
            else:
                assert isinstance(value, {"boolean": bool, "string": str}[prop["type"]]), (plugin, key, value)


def test_readme_notebook_paths_exist_from_the_root():
    readme = "\n".join(p.read_text() for p in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))])
    paths = set(re.findall(r"\b((?:notebooks|exercises|solutions)/[\w.*\-]+)", readme))
    assert {"exercises/ex01_reference.ipynb", "notebooks/00_setup.ipynb"} <= paths, sorted(paths)
    for path in sorted(paths):
        pattern = path.replace("NN", "[0-9][0-9]")
        assert list(ROOT.glob(pattern)), f"README names {path}, which does not exist under the kit's root"

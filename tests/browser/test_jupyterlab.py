"""What a learner sees in JupyterLab: every lesson and exercise opens, lessons run, exercises give feedback.

nbval proves the cells' outputs; only a browser proves they *render*: a mismatched ipywidgets / jupyterlab_widgets
pair shows "Error displaying widget" (or the widget's text repr) while every Python test passes, and a markdown cell
indented by four spaces shows as a grey code block. These tests start a throwaway JupyterLab the way ``./kit lab``
does (see ``conftest.py``: the kit's root, the kit's settings overrides), open notebooks in headless Chromium, and:

* the root: the file browser lists ``notebooks/``, ``exercises/`` and ``solutions/``, ``exercises/`` opens and lists
  every exercise, and no "Jupyter news" prompt appears;
* every lesson: opens with its title rendered as a heading; the lessons other than 03 (below) are opened one after
  another from the file browser of the JupyterLab page the root test loaded, each with its kernel started
  and idle, and their saved outputs render: every cell shows the output of one in-order run, none an error or a
  failure text, every figure is saved with its image and every image decodes (lesson 05's dispatch-boundary plot
  among them), and saving from the browser writes the paired ``.py`` source too (jupytext), unchanged. They are
  not run again here: nbval runs every lesson and compares each output with the saved one, and lesson 03 and
  exercise 01 run in this JupyterLab's kernels below (a run in the browser took a third of the suite's time);
* every exercise: opens with its kernel idle, its title rendered as a heading (not a code block) and its
  ``# FILL ME IN`` cells present (opened inside the same JupyterLab page, from its file browser, then closed and its
  kernel shut down);
* every test runs in that one page (JupyterLab loads once), opening its notebook from the file browser as a learner
  does, and closes its tabs and shuts its kernels down when it is done;
* exercise 01 as a learner does it: type a wrong answer into the first ``FILL ME IN`` cell, run it and its check (a
  *yours vs expected* table, not "passed"), then the right answer (``passed``);
* lesson 03 (the predicate): clear outputs, run all cells in a fresh kernel, check every cell ran in order without an
  error, every image output renders as a decoded ``<img>``, the route explorer renders as controls, and changing a
  control (a dropdown, a number box, the mode) changes the displayed route and reasons, and changing it back restores
  them.

Screenshots land in ``artifacts/browser/`` (git-ignored): the root, each lesson opened and after its run, each
exercise opened, exercise 01's wrong and right feedback. Run with ``pytest -m browser tests/browser``.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest

pytestmark = pytest.mark.browser

REPO = Path(__file__).resolve().parents[2]
ARTIFACTS = REPO / "artifacts" / "browser"
PREDICATE_LESSON = "notebooks/03_eligibility_predicate.ipynb"
LESSONS = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
EXERCISES = sorted(p.relative_to(REPO).as_posix() for p in (REPO / "exercises").glob("ex[0-9][0-9]_*.ipynb"))
NEWS_PROMPT = "official Jupyter news"
RUN_ALL_TIMEOUT_S = 300
PANEL = ".jp-NotebookPanel:not(.lm-mod-hidden)"
#: Texts that mean a cell or a widget failed to render, whatever the output's mime type.
FAILURE_TEXTS = ("Traceback (most recent call last)", "Error displaying widget", "Failed to display widget")


def shot(target, name: str) -> None:
    """Save a screenshot of a page or an element as ``artifacts/browser/<name>.png``."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    target.screenshot(path=str(ARTIFACTS / f"{name}.png"))


def menu(page, top: str, item: str) -> None:
    """Click a JupyterLab menu entry (the way a learner does)."""
    page.get_by_role("menuitem", name=top, exact=True).click()
    page.get_by_role("menuitem", name=item, exact=True).click()


def stem(path: str) -> str:
    return Path(path).stem


def open_notebook(page, lab, name: str, timeout_s: float = 120, in_app: bool = False) -> None:
    """Open ``name`` (a path from the kit's root) and wait until its kernel is started and idle (fails on a dialog).

    With ``in_app``, when JupyterLab is already loaded in ``page``, the notebook is opened the way a learner opens
    the next one, from the file browser (:func:`show_folder`, then a double click), instead of loading the whole
    application again."""
    if not (lab.root / name).is_file():
        pytest.fail(f"{name} does not exist")
    listed = page.locator(".jp-DirListing-item", has_text=Path(name).name)
    if in_app and page.locator(".jp-DirListing").count():
        show_folder(page, Path(name).parent)
        listed.first.dblclick()
    else:
        page.goto(lab.lab_url(name))
    page.wait_for_selector(f"{PANEL} .jp-Cell", timeout=timeout_s * 1000)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        dialog = page.locator(".jp-Dialog")
        if dialog.count() and dialog.first.is_visible():
            shot(page, f"dialog-{stem(name)}")
            pytest.fail(f"{name}: a dialog blocks the notebook (no kernelspec metadata?): {dialog.first.inner_text()}")
        sessions = [s for s in lab.api("sessions") if s.get("path", "") == name]
        status = page.locator(f"{PANEL} .jp-Notebook-ExecutionIndicator").first
        if (sessions and sessions[0]["kernel"]["execution_state"] == "idle" and status.count()
                and status.get_attribute("data-status") == "idle"):
            lab.track()
            return
        time.sleep(0.5)
    shot(page, f"no-kernel-{stem(name)}")
    pytest.fail(f"{name}: the kernel did not start and go idle within {timeout_s:.0f} s; sessions: "
                f"{lab.api('sessions')}\nserver log:\n{lab.log_tail()}")


def show_folder(page, folder: Path) -> None:
    """Show ``folder`` (a path from the kit's root) in the file browser as a learner gets there: the home crumb, then
    a double click on each folder in turn (each waited for: the listing updates after the click)."""
    if folder.name and folder.name in page.locator(".jp-BreadCrumbs").first.inner_text():
        return  # already there
    page.locator(".jp-BreadCrumbs-home").first.click()
    for part in folder.parts:
        text = page.locator(".jp-DirListing-itemText", has_text=re.compile(rf"^{re.escape(part)}$"))
        page.locator(".jp-DirListing-item", has=text).first.dblclick()


def prompts(page) -> list[str]:
    return [t.strip() for t in page.locator(f"{PANEL} .jp-CodeCell .jp-InputPrompt").all_inner_texts()]


def run_all(page, name: str) -> None:
    """Clear the saved outputs, run all cells, and wait until the queue drains: nothing pending and the kernel idle
    for three polls in a row (between two cells of a run the page can look finished for a moment)."""
    menu(page, "Edit", "Clear Outputs of All Cells")
    page.wait_for_function(f"() => document.querySelectorAll('{PANEL} .jp-OutputArea-output').length === 0")
    menu(page, "Run", "Run All Cells")
    deadline = time.monotonic() + RUN_ALL_TIMEOUT_S
    quiet = 0
    while time.monotonic() < deadline:
        p = prompts(page)
        status = page.locator(f"{PANEL} .jp-Notebook-ExecutionIndicator").first.get_attribute("data-status")
        quiet = quiet + 1 if p and p[0] != "[ ]:" and not any("*" in x for x in p) and status == "idle" else 0
        if quiet >= 3:
            return
        time.sleep(1)
    shot(page, f"timeout-{stem(name)}")
    pytest.fail(f"{name}: cells still running after {RUN_ALL_TIMEOUT_S} s: {prompts(page)}")


def save_and_read(page, lab, name: str) -> dict:
    """Save the (temporary copy of the) notebook from the browser and return its JSON as written."""
    page.locator(f'{PANEL} .jp-NotebookPanel-toolbar [data-command="docmanager:save"]').click()
    page.wait_for_function("() => !document.querySelector('.jp-mod-current.jp-mod-dirty')", timeout=30_000)
    time.sleep(0.5)
    return json.loads((lab.root / name).read_text())


def error_outputs(nb: dict) -> list[str]:
    out = []
    for i, cell in enumerate(nb["cells"]):
        for o in cell.get("outputs", []):
            if o.get("output_type") == "error":
                out.append(f"cell {i}: {o.get('ename')}: {o.get('evalue')}")
    return out


def output_texts(page) -> list[str]:
    return page.locator(f"{PANEL} .jp-OutputArea-output").all_inner_texts()


def rendered_images(page) -> list[dict]:
    """Every ``<img>`` in an output area, with whether the browser decoded it."""
    return page.locator(f"{PANEL} .jp-OutputArea-output img").evaluate_all(
        "els => els.map(e => ({w: e.naturalWidth, h: e.naturalHeight, complete: e.complete}))")


def no_news_prompt(page, wait_s: float = 4.0) -> None:
    """No "Jupyter news" toast appears (JupyterLab asks shortly after start unless the setting says otherwise)."""
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        if page.get_by_text(NEWS_PROMPT).count():
            shot(page, "FAILED-news-prompt")
            pytest.fail("JupyterLab shows the 'Jupyter news' prompt: the kit's overrides.json was not applied")
        time.sleep(0.5)


def test_lab_opens_at_the_kit_root_with_all_three_folders_and_no_news_prompt(desk_page, lab):
    page = desk_page  # the page the lessons and exercises below open their notebooks in
    page.goto(lab.lab_url())
    items = page.locator(".jp-DirListing-content .jp-DirListing-itemText")
    items.first.wait_for(state="visible", timeout=60_000)
    names = set(items.all_inner_texts())
    assert {"notebooks", "exercises", "solutions"} <= names, f"the file browser at the root lists {sorted(names)}"
    no_news_prompt(page)
    shot(page, "00-lab-root")

    page.locator(".jp-DirListing-item", has_text="exercises").first.dblclick()
    page.wait_for_function("() => [...document.querySelectorAll('.jp-DirListing-content .jp-DirListing-itemText')]"
                           ".some(e => e.textContent.startsWith('ex01_'))")
    listed = set(items.all_inner_texts())
    assert {Path(e).name for e in EXERCISES} <= listed, f"exercises/ lists {sorted(listed)}"
    assert len(EXERCISES) >= 8, EXERCISES
    shot(page, "00-lab-exercises-folder")


def test_predicate_lesson_runs_renders_and_explorer_is_live(desk_page, lab):
    page, name = desk_page, PREDICATE_LESSON
    t0 = time.monotonic()
    open_notebook(page, lab, name, in_app=True)
    check_title(page, name)
    run_all(page, name)
    ran_s = time.monotonic() - t0
    shot(page, "03-after-run-all")

    # every code cell ran, in order, in this fresh kernel, and none shows an error
    p = prompts(page)
    assert p == [f"[{i}]:" for i in range(1, len(p) + 1)], f"{name}: cells did not all run in order: {p}"
    nb = save_and_read(page, lab, name)
    assert not error_outputs(nb), f"{name}: error outputs: {error_outputs(nb)}"
    stderr = [f"cell {i}: {''.join(o.get('text', ''))}" for i, c in enumerate(nb["cells"])
              for o in c.get("outputs", []) if o.get("name") == "stderr"]
    (ARTIFACTS / "03-stderr.txt").write_text("\n".join(stderr) + "\n")  # shown to learners; not an error by itself
    texts = output_texts(page)
    bad = [t[:300] for t in texts if any(f in t for f in FAILURE_TEXTS)]
    assert not bad, f"{name}: outputs show failures: {bad}"

    # plots: every image output of the run is a decoded <img> in the page
    n_png = sum("image/png" in o.get("data", {}) or "image/svg+xml" in o.get("data", {})
                for c in nb["cells"] for o in c.get("outputs", []))
    imgs = rendered_images(page)
    assert n_png >= 1, f"{name}: no plot among the outputs"
    assert len(imgs) == n_png, f"{name}: {n_png} image outputs but {len(imgs)} <img> in the page"
    assert all(i["complete"] and i["w"] > 0 and i["h"] > 0 for i in imgs), f"{name}: undecoded images: {imgs}"
    shot(page.locator(f"{PANEL} .jp-OutputArea-output img").first, "03-first-plot")

    # the explorer renders as controls, not as a text repr or an error
    assert not [t for t in texts if "children=(" in t], f"{name}: a widget rendered as its text repr"
    explorer = page.locator(f"{PANEL} .fastpath-explorer").first
    explorer.wait_for(state="visible")
    assert explorer.locator("select").count() >= 3 and explorer.locator("input").count() >= 3
    route, reasons = explorer.locator(".fastpath-route"), explorer.locator(".fastpath-reasons")
    assert re.search(r"route: (triton|fallback)", route.inner_text()), route.inner_text()
    before = (route.inner_text(), reasons.inner_text())
    layout = explorer.locator(".fastpath-layout select")
    offset = explorer.locator(".fastpath-offset input")
    mode = explorer.locator(".fastpath-mode select")
    initial = (layout.input_value(), offset.input_value(), mode.input_value())
    shot(explorer, "03-explorer-initial")

    # moving a control changes the displayed route and reasons (a dropdown, then a number box, then the mode)
    from playwright.sync_api import expect

    expect.set_options(timeout=15_000)
    layout.select_option("transposed")
    expect(route).to_contain_text("route: fallback")
    expect(reasons).to_contain_text("last_dim_contiguous")
    assert (route.inner_text(), reasons.inner_text()) != before
    shot(explorer, "03-explorer-transposed")

    layout.select_option("contiguous")
    offset.fill("1")
    offset.press("Enter")
    expect(reasons).to_contain_text("input_alignment")
    expect(reasons).not_to_contain_text("last_dim_contiguous")
    shot(explorer, "03-explorer-offset1")

    offset.fill("0")
    offset.press("Enter")
    mode.select_option("force_fallback()")
    expect(reasons).to_contain_text("forced")
    expect(route).to_contain_text("route: fallback")
    shot(explorer, "03-explorer-forced")

    # changing everything back restores what was shown: the panel follows the controls both ways
    layout.select_option(initial[0])
    offset.fill(initial[1])
    offset.press("Enter")
    mode.select_option(initial[2])
    expect(route).to_have_text(before[0])
    expect(reasons).to_have_text(before[1])
    print(f"\n{name}: opened and ran all cells in {ran_s:.0f} s; {len(p)} code cells, {len(imgs)} plots")


def check_title(page, name: str) -> str:
    """The notebook's first markdown cell renders an ``<h1>`` and no code block; returns the title."""
    first = page.locator(f"{PANEL} .jp-MarkdownCell").first
    first.wait_for(state="visible")
    h1 = first.locator(".jp-RenderedMarkdown h1")
    assert h1.count() == 1, f"{name}: the first markdown cell shows no title heading: {first.inner_text()[:200]!r}"
    assert first.locator(".jp-RenderedMarkdown pre").count() == 0, f"{name}: the first markdown cell shows a code block"
    return h1.inner_text()


def check_ran_cleanly(page, lab, name: str) -> dict:
    """Every code cell ran in order, no error output, no failure text, every image decoded; returns the saved JSON."""
    p = prompts(page)
    nb = save_and_read(page, lab, name)
    assert not error_outputs(nb), f"{name}: error outputs: {error_outputs(nb)}"  # first: it says why a run stopped
    assert p == [f"[{i}]:" for i in range(1, len(p) + 1)], f"{name}: cells did not all run in order: {p}"
    bad = [t[:300] for t in output_texts(page) if any(f in t for f in FAILURE_TEXTS)]
    assert not bad, f"{name}: outputs show failures: {bad}"
    outputs = [o for c in nb["cells"] for o in c.get("outputs", [])]
    # a matplotlib figure's output holds its text ("<Figure size ...>") and its image: never the text alone
    figures = [o["data"] for o in outputs if "".join(o.get("data", {}).get("text/plain", "")).startswith("<Figure")]
    assert all("image/png" in d or "image/svg+xml" in d for d in figures), f"{name}: a figure saved without its image"
    n_img = sum("image/png" in o.get("data", {}) or "image/svg+xml" in o.get("data", {}) for o in outputs)
    imgs = rendered_images(page)
    assert len(imgs) == n_img, f"{name}: {n_img} image outputs but {len(imgs)} <img> in the page"
    assert all(i["complete"] and i["w"] > 0 and i["h"] > 0 for i in imgs), f"{name}: undecoded images: {imgs}"
    return nb


@pytest.mark.parametrize("name", [n for n in LESSONS if n != PREDICATE_LESSON], ids=stem)
def test_lesson_opens_and_its_saved_outputs_render(desk_page, lab, name):
    page = desk_page  # one JupyterLab page for the lessons (and exercises), each opened from the file browser
    t0 = time.monotonic()
    open_notebook(page, lab, name, in_app=True)
    title = check_title(page, name)
    assert title.startswith(stem(name)[:2]), f"{name}: title {title!r}"
    shot(page, f"lesson-{stem(name)}-opened")
    source = (lab.root / name).with_suffix(".py")
    before = source.stat().st_mtime
    time.sleep(1.1)  # the source's mtime must be able to move on a filesystem with one-second times
    check_ran_cleanly(page, lab, name)  # the saved outputs as the browser shows them; saves the notebook
    outputs = page.locator(f"{PANEL} .jp-OutputArea-output")
    outputs.nth(outputs.count() // 2).scroll_into_view_if_needed()  # what a learner reads mid-lesson
    shot(page, f"lesson-{stem(name)}-middle")
    # jupytext's contents manager saved the paired source too, byte for byte what the repo holds (running changes
    # outputs, not sources)
    assert source.stat().st_mtime > before, f"{name}: saving in JupyterLab did not write {source.name}"
    assert source.read_text() == (REPO / name).with_suffix(".py").read_text(), f"{source.name} changed on save"
    print(f"\n{name}: opened, rendered and saved in {time.monotonic() - t0:.0f} s")


@pytest.mark.parametrize("name", EXERCISES, ids=stem)
def test_exercise_opens_with_a_title_and_cells_to_fill(desk_page, lab, name):
    page = desk_page  # one JupyterLab page for all the exercises, each opened inside it
    open_notebook(page, lab, name, in_app=True)
    title = check_title(page, name)
    assert title.startswith(f"Exercise {stem(name)[2:4]}"), f"{name}: title {title!r}"
    todo = page.locator(f"{PANEL} .jp-CodeCell", has_text="# FILL ME IN")
    assert todo.count() >= 1, f"{name}: no '# FILL ME IN' cell visible"
    assert not output_texts(page), f"{name}: an exercise is distributed without outputs"
    shot(page, f"exercise-{stem(name)}-opened")


EX01 = "exercises/ex01_reference.ipynb"
WRONG = ("def my_default_eps(dtype):", "return torch.finfo(dtype).eps")  # the input dtype's eps: wrong for fp16/bf16
RIGHT = ("def my_default_eps(dtype):", "opmath = torch.float64 if dtype == torch.float64 else torch.float32",
         "return torch.finfo(opmath).eps")


def answer_and_check(page, answer_cell, check_cell, lines: tuple[str, ...]) -> str:
    """Replace the answer cell's text by typing ``lines`` (the editor indents the body), run it and the check below
    it (Shift+Enter twice, as a learner does), and return the check's output text."""
    editor = answer_cell.locator(".cm-content")
    editor.click()
    page.keyboard.press("ControlOrMeta+a")
    page.keyboard.press("Delete")
    for i, line in enumerate(lines):
        if i:
            page.keyboard.press("Enter")  # the editor auto-indents the function body
        page.keyboard.type(line)
    typed = editor.inner_text()
    assert all(line in typed for line in lines), f"the editor holds {typed!r}"
    before = check_cell.locator(".jp-InputPrompt").inner_text()
    page.keyboard.press("Shift+Enter")  # run the answer; the check cell becomes the active one
    page.keyboard.press("Shift+Enter")  # run the check
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        prompt = check_cell.locator(".jp-InputPrompt").inner_text().strip()
        if prompt not in (before.strip(), "[*]:", "[ ]:") and check_cell.locator(".jp-OutputArea-output").count():
            return check_cell.locator(".jp-OutputArea").inner_text()
        time.sleep(0.5)
    pytest.fail(f"the check did not run: prompt {check_cell.locator('.jp-InputPrompt').inner_text()!r}")


def test_exercise_cell_filled_wrong_then_right_gets_matching_feedback(desk_page, lab):
    page = desk_page
    open_notebook(page, lab, EX01, in_app=True)
    cells = page.locator(f"{PANEL} .jp-CodeCell")
    setup = cells.first
    setup.locator(".cm-content").click()
    page.keyboard.press("Shift+Enter")
    page.wait_for_function(f"() => document.querySelector('{PANEL} .jp-CodeCell .jp-InputPrompt')"
                           ".textContent.trim() === '[1]:'", timeout=120_000)
    answer = page.locator(f"{PANEL} .jp-CodeCell", has_text="def my_default_eps").first
    check = page.locator(f"{PANEL} .jp-CodeCell", has_text="ex.check_default_eps(my_default_eps)").first
    assert "# FILL ME IN" in answer.inner_text()

    wrong = answer_and_check(page, answer, check, WRONG)
    check.scroll_into_view_if_needed()
    shot(page, "exercise-ex01-wrong-answer")
    assert "passed" not in wrong and "expected" in wrong and "float16" in wrong, wrong

    right = answer_and_check(page, answer, check, RIGHT)
    check.scroll_into_view_if_needed()
    shot(page, "exercise-ex01-right-answer")
    assert "passed" in right and "FAILED" not in right and "WRONG" not in right, right

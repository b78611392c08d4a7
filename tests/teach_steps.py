"""Browser steps for the "Your gestures" (/hands) and "Your classes" (/classify) panels,
shared by their Chromium tests: a browser on a profile folder (IndexedDB persists in it)
with a fake camera, the panel's list, and recording a class."""
from __future__ import annotations

from harness.browser import FLAGS, LAUNCHER, fake_camera_flags, open_page

READY = "#model-status[data-state='ready']"


def open_on_profile(pw, profile, camera, url: str):
    """(context, page, log) of a page at ``url`` once its model is ready."""
    context = pw.chromium.launch_persistent_context(profile, executable_path=LAUNCHER, accept_downloads=True,
                                                    args=FLAGS + fake_camera_flags(camera))
    page, log = open_page(context, url)
    page.wait_for_selector(READY, timeout=300_000)
    return context, page, log


def yours(page) -> dict:
    """The panel's list: name -> examples."""
    return dict(page.eval_on_selector_all("#custom-list li", "items => items.map(li => [li.dataset.name, "
                                          "+li.dataset.examples])"))


def record(page, name: str) -> int:
    """Name it, click Record (3 s of the live source), wait for the list; the examples added."""
    before = yours(page).get(name, 0)
    page.fill("#custom-name", name)
    page.click("#custom-record")
    page.wait_for_function("([n, k]) => { const li = document.querySelector(`#custom-list li[data-name='${n}']`);"
                           " return li && +li.dataset.examples > k; }", arg=[name, before], timeout=60_000)
    return yours(page)[name] - before

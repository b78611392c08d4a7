"""Moved to tests/helpers.py; this name stays only until the last importers have moved."""
from tests.helpers import (ARTIFACTS, CHROMIUM, FLAGS, PageLog, drop_files, fake_camera_flags, launch,  # noqa: F401
                           letterbox_rgb, live_server, open_page, read_y4m_rgb, screenshot, write_y4m)

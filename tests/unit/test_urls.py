"""URLs that may carry credentials in any part, and their masking (plugins/plugin_utils/urls.py):
what decides which install tasks are hidden and how an installer's error is shown."""
from __future__ import annotations

import pytest

from ansible_collections.blackwell.sglang.plugins.plugin_utils import urls


@pytest.mark.parametrize("url", [
    "https://user:pw@mirror.example/simple", "https://tok3n@pypi.org/simple", "https://dl.example/t0ken/simple/",
    "https://mirror.example/simple?token=abc", "https://pypi.org/simple?token=abc", "https://mirror.example/#frag",
    "http://10.0.0.5:8080/simple"])
def test_urls_that_may_hold_a_credential(url):
    assert urls.carries_credentials(url)


@pytest.mark.parametrize("url", [
    "https://pypi.org/simple", "https://download.pytorch.org/whl/cu130", "https://flashinfer.ai/whl/cu130/",
    "https://mirror.example", "https://mirror.example/", "file:///srv/wheelhouse", "file:/srv/wheelhouse"])
def test_urls_that_cannot(url):
    assert not urls.carries_credentials(url)


def test_any_url_in_settings_requirements_and_a_lock():
    assert not urls.any_credentials(["", [], ["/srv/wheelhouse"], None, ["sglang==0.5.8"],
                                     "torch==2.9.1 --hash=sha256:" + "a" * 64])
    assert urls.any_credentials(["", ["x @ https://dl.example/t0ken/x-1.whl"]])
    assert urls.any_credentials(["--index-url https://mirror.example/simple\\nsglang==0.5.8"])


def test_mask_keeps_the_scheme_and_host_only_where_needed():
    text = ("ERROR: 403 for https://ci:S3CRET@dl.example:8443/t0ken/simple/torch/ and "
            "https://dl.example/path-t0ken/simple?key=Q5ECRET, not https://pypi.org/simple/torch/ "
            "nor file:///srv/wheelhouse; [fd00::1] at http://[fd00::1]:9/x")
    assert urls.mask(text) == (
        "ERROR: 403 for https://***@dl.example:8443/*** and https://dl.example/***, not "
        "https://pypi.org/simple/torch/ nor file:///srv/wheelhouse; [fd00::1] at http://[fd00::1]:9/***")
    assert urls.mask(None) == ""

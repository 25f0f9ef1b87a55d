# -*- coding: utf-8 -*-
# Copyright: (c) 2026, blackwell.sglang contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
"""URLs that may carry credentials, and text with them masked.

A package index or mirror can take its credentials in any part of its URL: user:password@ or
token@ before the host, a path segment (Cloudsmith, Azure Artifacts), a query (?token=). Which
part is secret cannot be told from the URL, so every http(s) URL of a host other than the public
ones below counts as carrying credentials unless it has neither userinfo, a path beyond '/', a
query nor a fragment. ``carries_credentials`` decides it for one URL, ``any_credentials`` for the
URLs found in several texts (source settings, requirement lines, a lock), and ``mask`` replaces
each such URL in a text by its scheme and host: what the roles' messages and hidden tasks show.

Plain Python without Ansible imports: the filters ``blackwell.sglang.url_credentials`` and
``blackwell.sglang.mask_urls`` call it, and the unit tests call it directly.
"""
from __future__ import annotations

import re
from urllib.parse import urlsplit

# Hosts whose URLs hold no credentials of the site's: PyPI, PyTorch's and FlashInfer's wheel
# indexes, NVIDIA's repositories, the Hugging Face hub.
PUBLIC_HOSTS = ("pypi.org", "files.pythonhosted.org", "download.pytorch.org", "flashinfer.ai",
                "developer.download.nvidia.com", "pypi.nvidia.com", "huggingface.co")
# A URL in running text: up to whitespace or a quote, less the punctuation that ends a sentence.
URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>]*[^\s'\"<>,.;:!?)]")


def _parts(url):
    try:
        parts = urlsplit(url)
        return parts, parts.hostname or ""
    except ValueError:
        return None, ""


def carries_credentials(url):
    """Whether url may hold a credential anywhere in it."""
    parts, host = _parts(str(url))
    if parts is None:
        return True
    if parts.scheme == "file":
        return False
    if "@" in parts.netloc:
        return True
    if host.lower().rstrip(".") in PUBLIC_HOSTS:
        return bool(parts.query or parts.fragment)
    return bool(parts.path.strip("/") or parts.query or parts.fragment)


def any_credentials(texts):
    """Whether any URL in texts (strings, or lists of them; None is nothing) may hold one."""
    for text in texts:
        for item in (text if isinstance(text, (list, tuple)) else [text]):
            if item and any(carries_credentials(url) for url in URL.findall(str(item))):
                return True
    return False


def _masked(match):
    url = match.group(0)
    if not carries_credentials(url):
        return url
    parts, host = _parts(url)
    if parts is None or not host:
        return "***"
    port = ""
    try:
        port = f":{parts.port}" if parts.port else ""
    except ValueError:
        pass
    userinfo = "***@" if "@" in parts.netloc else ""
    host = f"[{host}]" if ":" in host else host
    return f"{parts.scheme}://{userinfo}{host}{port}/***"


def mask(text):
    """text with every URL that may hold a credential cut to its scheme and host."""
    return URL.sub(_masked, "" if text is None else str(text))

"""The web policy as a pure function of the URL (policy/web.py): what is refused whatever is approved,
what is a read and what is a remote action."""

from __future__ import annotations

import pytest

from auger.policy.web import UrlRefused, WebPolicy


@pytest.mark.parametrize("url, why", [
    ("ftp://docs.example/x", "only http:// and https://"),
    ("file:///etc/passwd", "only http:// and https://"),
    ("https://user:secret@docs.example/", "credentials"),
    ("https://bücher.example/", "xn-- form"),
    ("https://docs.example:99999/", "not a valid URL"),
    ("https://docs example/", "spaces"),
    ("http://169.254.169.254/latest/meta-data/", "private or local address"),  # cloud metadata
    ("http://[::ffff:127.0.0.1]/", "private or local address"),  # IPv4 loopback dressed as IPv6
    ("http://100.64.0.1/", "private or local address"),  # shared address space
    ("http://0.0.0.0:8000/", "private or local address"),
    ("http://[fe80::1]/", "private or local address"),
])
def test_urls_no_approval_can_let_through(url, why):
    with pytest.raises(UrlRefused, match=why):
        WebPolicy.build().classify(url)


def test_allowlisted_hosts_are_reads_and_others_remote_actions():
    policy = WebPolicy.build(["docs.example", "*.corp.example"])
    assert policy.classify("https://docs.example/a?b=1").effect == "read_only"
    assert policy.classify("https://pypi.org/simple/").effect == "read_only"  # the default development list
    assert policy.classify("https://wiki.corp.example/").effect == "read_only"
    other = policy.classify("https://93.184.216.34/")
    assert other.effect == "remote_action" and other.commands == (("web_fetch", "93.184.216.34"),)


def test_a_private_address_is_reached_only_when_the_user_listed_it():
    assert WebPolicy.build(["10.1.2.3"]).classify("http://10.1.2.3/").effect == "read_only"
    with pytest.raises(UrlRefused):
        WebPolicy.build(["10.1.2.4"]).classify("http://10.1.2.3/")

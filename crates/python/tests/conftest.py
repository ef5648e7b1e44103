"""Shared fixtures: the repository's scenarios and a small scenario with TCP, UDP and ping."""

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]

SMALL = """
name = "small"
duration = "500ms"
sample = "10ms"
[link]
rate = "10mbit"
delay = "5ms"
[policy]
qdisc = "htb"
default = "bulk"
[[policy.class]]
name = "root"
rate = "10mbit"
[[policy.class]]
name = "bulk"
parent = "root"
rate = "6mbit"
ceil = "10mbit"
[[policy.class]]
name = "rt"
parent = "root"
rate = "4mbit"
ceil = "10mbit"
[[policy.filter]]
class = "rt"
protocol = "udp"
[[flow]]
name = "t"
kind = "tcp"
[[flow]]
name = "u"
kind = "udp"
rate = "3mbit"
size = 500
[[flow]]
name = "p"
kind = "ping"
interval = "50ms"
"""


@pytest.fixture
def small() -> str:
    return SMALL


@pytest.fixture(scope="module")
def small_module() -> str:
    return SMALL


@pytest.fixture(scope="session")
def root() -> Path:
    return ROOT

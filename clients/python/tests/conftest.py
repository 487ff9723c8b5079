"""Shared fixtures: the conformance cases, and the test fleet that clients/conformance/fleet.py
started (its endpoints, servers and control API)."""

import json
import os
import re
import urllib.error
import urllib.request
from typing import Any, Dict, List

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="session")
def cases() -> Dict[str, Any]:
    path = os.environ.get("FLURRY_CONFORMANCE_CASES") or os.path.join(
        HERE, "..", "..", "conformance", "cases.json")
    with open(path) as f:
        return json.load(f)


def _http(url: str, method: str = "GET", headers: Dict[str, str] = None) -> bytes:
    req = urllib.request.Request(url, method=method, headers=headers or {})
    with urllib.request.urlopen(req, timeout=30) as r:
        return r.read()


class Fleet:
    """The fleet of fleet.py: proxies (what clients use), servers and the control API."""

    def __init__(self) -> None:
        try:
            self.endpoints: List[str] = os.environ["FLURRY_TEST_ENDPOINTS"].split(",")
            self.servers: List[str] = os.environ["FLURRY_TEST_SERVERS"].split(",")
            self.control: str = os.environ["FLURRY_TEST_CONTROL"]
            self.admin_token: str = os.environ["FLURRY_TEST_ADMIN_TOKEN"]
        except KeyError as e:
            raise RuntimeError(f"{e} is not set: run the integration tests under "
                               "clients/conformance/fleet.py (see README.md)") from None

    def _post(self, path: str) -> None:
        _http(self.control + path, "POST")

    def fault(self, i: int, status: int = 503, count: int = 1, retry_after: Any = None,
              code: str = None, reason: str = None) -> None:
        q = f"status={status}&count={count}"
        if retry_after is not None:
            q += f"&retry_after={retry_after}"
        if code:
            q += f"&code={code}"
        if reason:
            q += f"&reason={reason}"
        self._post(f"/servers/{i}/fault?{q}")

    def delay(self, i: int, ms: int, count: int = 1) -> None:
        self._post(f"/servers/{i}/delay?ms={ms}&count={count}")

    def kill(self, i: int) -> None:
        self._post(f"/servers/{i}/kill")

    def start(self, i: int) -> None:
        self._post(f"/servers/{i}/start")

    def clock(self, i: int, offset: float) -> None:
        """Steps server i's wall clock to the real one plus `offset` seconds (fleet.py --faketime)."""
        self._post(f"/servers/{i}/clock?offset={offset}")

    def rollbacks(self, i: int, outcome: str) -> int:
        """flurry_rollback_events_total{outcome=...} of server i."""
        text = _http(self.servers[i] + "/metrics").decode()
        m = re.search(r'^flurry_rollback_events_total\{outcome="%s"\} (\d+)' % outcome, text, re.M)
        return int(m.group(1)) if m else 0

    def reset(self, i: int) -> None:
        self._post(f"/servers/{i}/reset")

    def stats(self, i: int) -> Dict[str, Any]:
        return json.loads(_http(f"{self.control}/servers/{i}/stats"))

    def restore(self) -> None:
        """Puts every server back: running, no faults, no delays, stats zeroed."""
        for i in range(len(self.servers)):
            self.start(i)
            self.fault(i, count=0)
            self.delay(i, ms=0, count=0)
            self.reset(i)

    def id_requests_ok(self) -> int:
        """flurry_http_requests_total{route="/v1/ids",code="200"} summed over the servers."""
        total = 0
        for s in self.servers:
            text = _http(s + "/metrics").decode()
            m = re.search(r'^flurry_http_requests_total\{route="/v1/ids",code="200"\} (\d+)', text, re.M)
            total += int(m.group(1)) if m else 0
        return total

    def tso_leader(self, timeout: float = 30.0) -> int:
        """The index of the server that leads the timestamp oracle (GET /readyz/tso 200 on it),
        waiting until one does."""
        import time
        deadline = time.monotonic() + timeout
        while True:
            for i, s in enumerate(self.servers):
                try:
                    _http(s + "/readyz/tso")
                    return i
                except (OSError, urllib.error.HTTPError):
                    pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"no server leads the timestamp oracle after {timeout} s")
            time.sleep(0.05)

    def node(self, i: int) -> int:
        return json.loads(_http(self.servers[i] + "/v1/layout"))["node"]

    def order_number(self, i: int) -> str:
        return json.loads(_http(f"{self.servers[i]}/v1/order-numbers?count=1"))["order_numbers"][0]

    def server_decode_order(self, i: int, code: str) -> Dict[str, Any]:
        return json.loads(_http(f"{self.servers[i]}/v1/order-numbers/{code}",
                                headers={"Authorization": f"Bearer {self.admin_token}"}))

    def server_decode(self, i: int, id: int) -> Dict[str, Any]:
        return json.loads(_http(f"{self.servers[i]}/v1/ids/{id}"))


@pytest.fixture
def fleet() -> Fleet:
    """The fleet, put back (started, no faults or delays, stats zeroed) before and after."""
    f = Fleet()
    f.restore()
    yield f
    f.restore()
